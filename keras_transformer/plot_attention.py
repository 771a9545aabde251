r"""Saves attention heat maps of one sentence (the paper's Figures 3-5).

  python -m keras_transformer.plot_attention --model=runs/demo \
      --sentence="The queen works on the seventeenth of November." \
      --layer=-1 --output_dir=plots

Writes `encoder_layer<L>.png`, `decoder_layer<L>.png` (decoder
self-attention) and `cross_layer<L>.png` (encoder-decoder attention), one
heat map per head with the subword pieces on the axes, for the model's own
beam-search translation. Layers are numbered from 1 (bottom) to N, as in the
paper's figures: `--layer`, L in the file names and the figure titles agree.
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
flags.DEFINE_integer(
    "layer",
    -1,
    "Layer number, from 1 (bottom) to N, as in the file names and titles; "
    "negative counts from the top (-1 = the top layer).",
)
flags.DEFINE_string("output_dir", "attention_plots", "Where the PNGs go.")
flags.mark_flags_as_required(["model", "sentence"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf

    from keras_transformer import inference, serving
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.visualization import attention

    try:
        path = FLAGS.model
        if os.path.isdir(path):
            if inference.export_path(path):
                raise ValueError(
                    "plot_attention reads the Keras model (a training "
                    "directory or a .keras file); a SavedModel export holds "
                    "the decoding graph, not the layers' attention. "
                    f"Received: model={path}"
                )
            path = os.path.join(path, serving.MODEL_FILE)
        model = serving.load_model(path)
        tokenizer = SubwordTokenizer.from_file(
            inference.vocab_beside(path, FLAGS.vocab)
        )
        # Checked before the slow part, so a bad flag fails at once.
        attention.layer_number(model.config.num_layers, FLAGS.layer)
        attention.check_output_dir(FLAGS.output_dir)
        maps = attention.attention_maps(model, tokenizer, FLAGS.sentence)
        for output in attention.save_layer_plots(maps, FLAGS.layer, FLAGS.output_dir):
            print(output)
    except (ValueError, OSError, TypeError, tf.errors.OpError) as error:
        # User errors: one line, no traceback. The tf.errors come from an
        # unreadable --vocab (missing, or a directory).
        return fail("plot_attention", error)
    print("Translation:", " ".join(maps.target))
    return 0


if __name__ == "__main__":
    app.run(main)
