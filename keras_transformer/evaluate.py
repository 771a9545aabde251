r"""Translates a test set and reports sacreBLEU, chrF and the paper's BLEU.

  python -m keras_transformer.evaluate --model=runs/base \
      --src=newstest2014.en --ref=newstest2014.de --output=hyps.de
  python -m keras_transformer.evaluate --model=/models/transformer \
      --data=tfds:wmt14_translate/de-en --split=test --output=hyps.de

`--model` is a training directory, a `.keras` checkpoint (e.g. an averaged
one) or an exported SavedModel. Prints the sacreBLEU signature to stderr and
one JSON line on stdout: bleu, chrf, signature, num_sentences and
tokenized_bleu — the paper's Table 2 metric, BLEU on Moses-tokenized text
with compounds split (`##AT##-##AT##`, as tensor2tensor's
get_ende_bleu.sh); see `keras_transformer/evaluation.py`.
"""

import json
import sys

from absl import app, flags

from keras_transformer.commands import define_threads_flag, fail, progress_printer
from keras_transformer.data.text_files import read_lines

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "model", None, "Training directory, .keras file or SavedModel directory."
)
flags.DEFINE_string(
    "vocab", None, "Sentencepiece model for a .keras model (default: found beside it)."
)
flags.DEFINE_string("src", None, "Source sentences, one per line.")
flags.DEFINE_string("ref", None, "Reference translations, one per line.")
flags.DEFINE_string(
    "data",
    None,
    "Instead of --src/--ref: a data spec "
    "(demo, text:PREFIX, tfds:wmt14_translate/de-en).",
)
flags.DEFINE_enum(
    "split",
    "test",
    ["train", "dev", "test"],
    "Split of --data (test = newstest2014 for TFDS WMT14).",
)
flags.DEFINE_string("src_lang", "en", "Source language.")
flags.DEFINE_string("tgt_lang", "de", "Target language.")
flags.DEFINE_string("data_dir", None, "TFDS data directory.")
flags.DEFINE_string(
    "output",
    None,
    "File for the hypotheses, one per line. Opened (created or emptied, as "
    "by shell redirection) before translating, so a path that cannot be "
    "written fails at once; its directory must exist (it is not created).",
)
flags.DEFINE_integer("batch_size", 32, "Sentences per batch.", lower_bound=1)
define_threads_flag()
flags.mark_flag_as_required("model")


def _test_set():
    if FLAGS.data:
        from keras_transformer.data import sources

        return sources.load_pairs(
            FLAGS.data,
            FLAGS.split,
            FLAGS.src_lang,
            FLAGS.tgt_lang,
            FLAGS.data_dir,
        )
    if not (FLAGS.src and FLAGS.ref):
        raise ValueError(
            "Pass --src and --ref files, or --data. "
            f"Received: src={FLAGS.src}, ref={FLAGS.ref}, data=None"
        )
    sources_, references = read_lines(FLAGS.src), read_lines(FLAGS.ref)
    if len(sources_) != len(references):
        raise ValueError(
            "--src and --ref must have one line per sentence. Received: "
            f"{FLAGS.src} has {len(sources_)} lines, "
            f"{FLAGS.ref} has {len(references)}"
        )
    return sources_, references


def _open_output(path: str):
    """Opens `path` for the hypotheses, naming it if that fails.

    Raises:
        OSError: (the subclass `open` raised) if `path` cannot be written:
            its directory is missing, it is a directory, or no permission.
    """
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as error:
        raise type(error)(
            f"Cannot write --output ({error.strerror}); its directory must "
            f"exist (it is not created) and be writable. Received: output={path}"
        ) from None


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf

    from keras_transformer import evaluation, inference

    try:
        # Before TensorFlow's first op: the setting is fixed once it starts.
        inference.set_decoding_threads(FLAGS.model, FLAGS.intra_op_threads)
        sources_, references = _test_set()
        translator = inference.load_translator(FLAGS.model, FLAGS.vocab)
        # Before the long translation, so a bad path fails at once.
        output = _open_output(FLAGS.output) if FLAGS.output else None
    except (ValueError, OSError, TypeError, tf.errors.OpError) as error:
        # User errors: one line, no traceback. The tf.errors come from an
        # unreadable --vocab or input file (missing, or a directory).
        return fail("evaluate", error)
    hypotheses = translator.translate(sources_, FLAGS.batch_size, progress_printer())
    if output:
        with output:
            output.writelines(line + "\n" for line in hypotheses)
    scores = evaluation.score(hypotheses, references, FLAGS.tgt_lang)
    print(
        f"{translator.description}: BLEU {scores.bleu:.2f} "
        f"({scores.bleu_signature}), chrF {scores.chrf:.2f}, tokenized BLEU "
        f"{scores.tokenized_bleu:.2f}",
        file=sys.stderr,
    )
    print(json.dumps(scores.to_json_dict()))
    return 0


if __name__ == "__main__":
    app.run(main)
