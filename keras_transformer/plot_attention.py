r"""Saves attention heat maps of one sentence (the paper's Figures 3-5).

  python -m keras_transformer.plot_attention --model=runs/demo \
      --sentence="The queen works on the seventeenth of November." \
      --layer=-1 --output_dir=plots

Writes `encoder_layer<L>.png`, `decoder_layer<L>.png` (decoder
self-attention) and `cross_layer<L>.png` (encoder-decoder attention), one
heat map per head with the subword pieces on the axes, for the model's own
beam-search translation.
"""

import os

from absl import app, flags

from keras_transformer.commands import fail

FLAGS = flags.FLAGS
flags.DEFINE_string("model", None, "Training directory or .keras file.")
flags.DEFINE_string(
    "vocab", None, "Sentencepiece model (default: found beside the model)."
)
flags.DEFINE_string("sentence", None, "The source sentence.")
flags.DEFINE_integer("layer", -1, "Layer (0-based; -1 = the top one).")
flags.DEFINE_string("output_dir", "attention_plots", "Where the PNGs go.")
flags.mark_flags_as_required(["model", "sentence"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from keras_transformer import inference, serving
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.visualization import attention

    try:
        path = FLAGS.model
        if os.path.isdir(path):
            path = os.path.join(path, "model.keras")
        model = serving.load_model(path)
        tokenizer = SubwordTokenizer.from_file(
            inference.vocab_beside(path, FLAGS.vocab)
        )
        maps = attention.attention_maps(model, tokenizer, FLAGS.sentence)
        os.makedirs(FLAGS.output_dir, exist_ok=True)
        layer = FLAGS.layer % model.config.num_layers
        for kind in attention.KINDS:
            output = os.path.join(FLAGS.output_dir, f"{kind}_layer{layer}.png")
            attention.plot_heads(maps, kind, FLAGS.layer, output)
            print(output)
    except (ValueError, FileNotFoundError, TypeError) as error:
        return fail("plot_attention", error)
    print("Translation:", " ".join(maps.target))
    return 0


if __name__ == "__main__":
    app.run(main)
