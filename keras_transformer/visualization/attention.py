"""Attention heat maps of one sentence, like the paper's Figures 3-5.

Layers are numbered from 1 (the bottom one) to N, as in the paper's
figures, in titles and file names alike. Shape legend: N heads, S source
length, T target length.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from keras_transformer import tokens

# Kind of attention -> (title, rows, columns) of its maps.
KINDS = {
    "encoder": ("Encoder self-attention", "source", "source"),
    "decoder": ("Decoder self-attention", "target", "target_input"),
    "cross": ("Encoder-decoder attention", "target", "source"),
}


@dataclasses.dataclass
class AttentionMaps:
    """The attention weights of every layer for one sentence pair.

    Attributes:
        source: source pieces, EOS included (S).
        target_input: decoder input pieces, BOS first (T).
        target: the predicted pieces, EOS included (T): row i of the
            decoder maps is the query that predicts `target[i]`.
        encoder: per layer, float [N, S, S].
        decoder: per layer, float [N, T, T] (causal: lower-triangular).
        cross: per layer, float [N, T, S].
    """

    source: list
    target_input: list
    target: list
    encoder: list
    decoder: list
    cross: list


def attention_maps(model, tokenizer, sentence: str, target_ids=None):
    """Runs `model` on `sentence` and its translation, keeping the weights.

    Args:
        model: a `keras_transformer.Transformer`.
        tokenizer: its `SubwordTokenizer`.
        sentence: the source sentence.
        target_ids: the translation's ids, EOS included; default: the
            model's own beam-search translation.

    Returns:
        `AttentionMaps`.

    Raises:
        ValueError: if the sentence has no subword tokens, or more than the
            model translates (`max_length - 1`, one position is EOS's)
            when `target_ids` is None or the positions are learned; or if
            `target_ids` has more than `max_length` tokens and the
            positions are learned.
    """
    from keras_transformer.decoding.translator import Translator

    pieces = tokenizer.tokenize(tf.constant([sentence]))[0].numpy().tolist()
    limit = model.config.max_length - 1
    # The translator would translate a truncated source, and learned
    # positions stop at max_length; sinusoids go on.
    too_long = len(pieces) > limit and (
        target_ids is None or model.config.positional == "learned"
    )
    if not pieces or too_long:
        raise ValueError(
            f"The sentence has {len(pieces)} subword tokens; plotting needs "
            f"1 to {limit} (the model's max_length - 1): pass a non-empty "
            f"sentence, shortened if needed. Received: sentence={sentence!r}"
        )
    source_ids = np.array([pieces + [tokens.EOS_ID]], np.int32)  # [1, S]
    if target_ids is None:
        translator = Translator(model, tokenizer)  # Kept alive for the call.
        result = translator.translate_ids(source_ids)
        length = int(result["lengths"][0])
        target_ids = result["output_ids"][0, :length].numpy().tolist()
    target_ids = list(target_ids)
    # The decoder input (BOS + all but the last) is as long as the target.
    learned = model.config.positional == "learned"
    if learned and len(target_ids) > model.config.max_length:
        raise ValueError(
            "`target_ids` must have at most max_length="
            f"{model.config.max_length} tokens, where the model's learned "
            "positions stop; pass a shorter translation. "
            f"Received: len(target_ids)={len(target_ids)}"
        )
    target_input = np.array([[tokens.BOS_ID] + target_ids[:-1]], np.int32)
    memory, memory_mask, encoder = model.encode(
        source_ids, return_attention_weights=True
    )
    _, decoder = model.decode(
        target_input, memory, memory_mask, return_attention_weights=True
    )
    return AttentionMaps(
        source=tokenizer.id_to_piece(source_ids[0]),
        target_input=tokenizer.id_to_piece(target_input[0]),
        target=tokenizer.id_to_piece(target_ids),
        encoder=[np.asarray(w[0]) for w in encoder],
        decoder=[np.asarray(layer["self"][0]) for layer in decoder],
        cross=[np.asarray(layer["cross"][0]) for layer in decoder],
    )


def layer_number(num_layers: int, layer: int) -> int:
    """The number (1 to N, bottom to top) of `layer`.

    Args:
        num_layers: N, the model's layers.
        layer: a number from 1 to N, or negative to count from the top
            (-1 is layer N).

    Returns:
        The number, from 1 to N.

    Raises:
        ValueError: if `layer` is 0 or beyond N layers either way.
    """
    if not (1 <= layer <= num_layers or -num_layers <= layer <= -1):
        raise ValueError(
            f"The model has {num_layers} layers, numbered from 1; `layer` "
            f"must be in [1, {num_layers}], or in [-{num_layers}, -1] to "
            f"count from the top. Received: layer={layer}"
        )
    return layer if layer > 0 else num_layers + 1 + layer


def pyplot():
    """matplotlib's `pyplot` on the Agg backend (files only, no display).

    Raises:
        ImportError: without matplotlib, an optional dependency (the `plot`
            extra), naming the command that installs it.
    """
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError(
            "Attention plots need matplotlib, an optional dependency of "
            "keras-transformer-nmt: pip install 'keras-transformer-nmt[plot]' "
            "(or pip install matplotlib)."
        ) from error
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def plot_heads(maps: AttentionMaps, kind: str, layer: int, path: str):
    """Saves one PNG with a heat map per head of one layer.

    Args:
        maps: from `attention_maps`.
        kind: "encoder", "decoder" or "cross".
        layer: layer number, from 1 (bottom) to N; negative counts from
            the top (-1 is the top layer). The title shows the number.
        path: the PNG file to write.

    Returns:
        The matplotlib figure (closed after saving; for inspection).

    Raises:
        ValueError: for an unknown kind or a layer out of range.
    """
    plt = pyplot()
    if kind not in KINDS:
        raise ValueError(
            f"`kind` must be one of {sorted(KINDS)}. Received: kind={kind!r}"
        )
    weights = getattr(maps, kind)
    number = layer_number(len(weights), layer)
    heads = weights[number - 1]  # [N, rows, columns]
    title, rows, columns = KINDS[kind]
    row_labels, column_labels = getattr(maps, rows), getattr(maps, columns)
    num_heads = heads.shape[0]
    grid = int(np.ceil(np.sqrt(num_heads)))
    size = 0.3 * max(len(row_labels), len(column_labels)) + 2
    figure, axes = plt.subplots(
        grid, grid, figsize=(size * grid, size * grid), squeeze=False
    )
    for head, axis in enumerate(axes.flat):
        if head >= num_heads:
            axis.axis("off")
            continue
        axis.imshow(heads[head], cmap="viridis", vmin=0.0, vmax=1.0)
        axis.set_title(f"head {head + 1}")
        axis.set_xticks(range(len(column_labels)), column_labels, rotation=90)
        axis.set_yticks(range(len(row_labels)), row_labels)
    figure.suptitle(f"{title}, layer {number}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return figure


def check_output_dir(output_dir: str) -> None:
    """Fails if `output_dir` exists as something other than a directory
    (`os.makedirs` would say only "File exists").

    Raises:
        ValueError: naming the path.
    """
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise ValueError(
            "The output directory names an existing file, not a directory; "
            "pass a directory (it is created if missing). "
            f"Received: output_dir={output_dir}"
        )


def save_layer_plots(maps: AttentionMaps, layer: int, output_dir: str) -> list:
    """Saves the plots of every kind of attention of one layer.

    Args:
        maps: from `attention_maps`.
        layer: layer number, as for `plot_heads` (1-based; -1 = the top).
        output_dir: the directory of the PNGs (created if missing).

    Returns:
        The paths written: `encoder_layer<L>.png`, `decoder_layer<L>.png`
        and `cross_layer<L>.png` in `output_dir`, where L is the layer
        number from 1 that the figures' titles show.

    Raises:
        ValueError: for a layer out of range or an `output_dir` that is a
            file (before anything is written).
    """
    number = layer_number(len(maps.encoder), layer)
    check_output_dir(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for kind in KINDS:
        path = os.path.join(output_dir, f"{kind}_layer{number}.png")
        plot_heads(maps, kind, number, path)
        paths.append(path)
    return paths
