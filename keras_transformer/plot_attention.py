r"""Saves attention heat maps of one sentence (the paper's Figures 3-5).

  python -m keras_transformer.plot_attention --model=runs/demo \
      --sentence="The queen works on the seventeenth of November." \
      --layer=-1 --output_dir=plots

Writes `encoder_layer<L>.png`, `decoder_layer<L>.png` (decoder
self-attention) and `cross_layer<L>.png` (encoder-decoder attention), one
heat map per head with the subword pieces on the axes, for the model's own
beam-search translation. Layers are numbered from 1 (bottom) to N, as in the
paper's figures: `--layer`, L in the file names and the figure titles agree.
It needs matplotlib, an optional dependency: pip install
'keras-transformer-nmt[plot]'.
"""

import os

from absl import app, flags

from keras_transformer.commands import fail, run_command

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Defines the command's flags on `flag_values` (when run as a script:
    on absl's global flags, where another command's would clash)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_string(
        "model", None, "Training directory or .keras file.", **fv
    )
    flags.DEFINE_string(
        "vocab",
        None,
        "Sentencepiece model (default: found beside the model).",
        **fv,
    )
    flags.DEFINE_string("sentence", None, "The source sentence.", **fv)
    flags.DEFINE_integer(
        "layer",
        -1,
        "Layer number, from 1 (bottom) to N, as in the file names and titles; "
        "negative counts from the top (-1 = the top layer).",
        **fv,
    )
    flags.DEFINE_string(
        "output_dir", "attention_plots", "Where the PNGs go.", **fv
    )
    flags.mark_flags_as_required(["model", "sentence"], **fv)


def main(argv, flag_values=FLAGS):
    """Saves the plots the flags ask for; returns the exit status (1 after
    a user error, printed as one line)."""
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf

    from keras_transformer import inference, model_files
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.visualization import attention

    try:
        # Before the model loads: matplotlib is an optional dependency.
        attention.pyplot()
    except ImportError as error:
        return fail("plot_attention", error)
    try:
        path = flag_values.model
        if os.path.isdir(path):
            if inference.export_path(path):
                raise ValueError(
                    "plot_attention reads the Keras model (a training "
                    "directory or a .keras file); a SavedModel export holds "
                    "the decoding graph, not the layers' attention. "
                    f"Received: model={path}"
                )
            path = os.path.join(path, model_files.MODEL_FILE)
        model = model_files.load_model(path)
        tokenizer = SubwordTokenizer.from_file(
            inference.vocab_beside(path, flag_values.vocab)
        )
        # Checked before the slow part, so a bad flag fails at once.
        attention.layer_number(model.config.num_layers, flag_values.layer)
        attention.check_output_dir(flag_values.output_dir)
        maps = attention.attention_maps(model, tokenizer, flag_values.sentence)
        for output in attention.save_layer_plots(
            maps, flag_values.layer, flag_values.output_dir
        ):
            print(output)
    except (ValueError, OSError, TypeError, tf.errors.OpError) as error:
        # User errors: one line, no traceback. The tf.errors come from an
        # unreadable --vocab (missing, or a directory).
        return fail("plot_attention", error)
    print("Translation:", " ".join(maps.target))
    return 0


def run():
    """Entry point of `python -m keras_transformer.plot_attention`,
    and of the installed `keras-transformer-plot-attention` command."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
