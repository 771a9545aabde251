r"""Exports a trained Transformer as a TF Serving SavedModel.

Writes `<export_dir>/<model_name>/<version>/` with the tokenizer inside and
the signatures `serving_default`, `translate_ids` and
`translate_with_options` (only the first two with `--server_batching`, for a
TF Serving that batches requests; see export/README.md):

  python -m keras_transformer.export_model --model_dir=runs/base \
      --export_dir=/models --model_name=transformer --version=1

(`python export/export_model.py ...` in a checkout is the same command.)

The model is `<model_dir>/model.keras`, or `--checkpoint` (several
comma-separated `.keras` files are averaged, as in the paper's section 6.1);
the vocabulary is `--vocab`, or that of the checkpoints' training run
(beside them, or in the run's directory for `checkpoints/ckpt-*.keras`), or
`--model_dir`'s `vocab.model` (or its one `*.model`).
A user error (a missing file, an existing version, a bad name) ends with one
`export_model.py: error: ...` line and exit status 1, before any model loads.
"""

import os

import tensorflow as tf
from absl import app, flags

from keras_transformer import files, inference, model_files, serving
from keras_transformer.commands import fail, run_command
from keras_transformer.data import text_files
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.decoding import transformer_search
from keras_transformer.decoding import translator as translator_lib
from keras_transformer.training import averaging

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Defines the command's flags (called when run as a command).

    Not at import time, so tests import `export` next to other binaries
    whose flags share names (`--model_dir`).
    """
    flags.DEFINE_string(
        "model_dir",
        None,
        "Training output: holds model.keras and a *.model vocabulary.",
        flag_values=flag_values,
    )
    flags.DEFINE_list(
        "checkpoint",
        [],
        "`.keras` file(s) to export instead of <model_dir>/model.keras; "
        "several are averaged (e.g. the last 5 checkpoints).",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "vocab",
        None,
        "Sentencepiece model; default: the one beside the --checkpoint "
        "files (as in their run's directory), "
        "else the vocab.model (or one *.model) in model_dir.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "export_dir",
        None,
        "TF Serving base directory.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "model_name",
        "transformer",
        "Model name in TF Serving.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "version",
        1,
        "Version directory (positive integer).",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "beam_size",
        translator_lib.DEFAULT_BEAM_SIZE,
        "Beam size K (at most the vocabulary size).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "alpha",
        translator_lib.DEFAULT_ALPHA,
        "Default length penalty alpha.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "length_offset",
        translator_lib.DEFAULT_LENGTH_OFFSET,
        "Default output length allowance beyond the input length.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "jit_compile",
        False,
        "Decode with XLA (on CPU faster only for single sentences; from 8 "
        "sentences on slower than the stock export served with one intra-op "
        "thread: export/README.md). TF Serving then needs "
        "--xla_cpu_compilation_enabled=true on CPU; stock settings reject it.",
        flag_values=flag_values,
    )
    flags.DEFINE_integer(
        "parallel_searches",
        transformer_search.DEFAULT_PARALLEL_SEARCHES,
        "Without --jit_compile, split each batch into this many beam searches "
        "that run side by side (same results; faster on CPU at batches of 8 "
        "and more); 1 searches the whole batch at once.",
        lower_bound=1,
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "warmup",
        True,
        "Write TF Serving's warmup requests (assets.extra/"
        "tf_serving_warmup_requests), one per signature, which TF Serving runs "
        "when it loads the version, so that no client request pays for the "
        "first call's set-up.",
        flag_values=flag_values,
    )
    flags.DEFINE_string(
        "warmup_file",
        None,
        "Text file of sentences, one per line, for the warmup requests (one "
        "batch); default: two built-in sentences.",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "server_batching",
        False,
        "For a TF Serving started with --enable_batching: export only the "
        "signatures it can batch, serving_default and translate_ids, without "
        "translate_with_options, whose scalar options TF Serving's batcher "
        "refuses (it would then refuse the whole version at its warmup).",
        flag_values=flag_values,
    )
    flags.DEFINE_bool(
        "overwrite",
        False,
        "Replace an existing version (never one that holds an input).",
        flag_values=flag_values,
    )
    flags.mark_flag_as_required("export_dir", flag_values=flag_values)


def load_vocab(path: str) -> SubwordTokenizer:
    """Loads the sentencepiece vocabulary, naming the file if it is wrong.

    Raises:
        FileNotFoundError: if `path` is not a file.
        ValueError: if the file is not a sentencepiece model.
    """
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        raise FileNotFoundError(
            "No vocabulary file at this path; pass --vocab PATH of the "
            f"sentencepiece `*.model` file of training. Received: vocab={path}"
        )
    return SubwordTokenizer.from_file(path)


def _check_inputs_outside(path, inputs):
    """Fails if --overwrite would delete an input (the version directory is
    replaced whole), e.g. a training directory named like a version.

    Raises:
        ValueError: if an input is `path` or inside it.
    """
    if files.is_remote(path):
        return
    version = os.path.realpath(path)
    for name in inputs:
        if name and not files.is_remote(name):
            real = os.path.realpath(name)
            if os.path.commonpath([real, version]) == version:
                raise ValueError(
                    "--overwrite would delete an input of the export, which is "
                    "inside the version directory it replaces; choose another "
                    "--export_dir, --model_name or --version. "
                    f"Received: path={path}, input={name}"
                )


def default_vocab(model_dir, checkpoints):
    """The vocabulary of the exported model without --vocab: the one of the
    checkpoints' training run, found beside them as `translate` finds it,
    else `model_files.find_vocab(model_dir)`.

    Raises:
        ValueError: if the checkpoints' vocabularies differ, or differ from
            `model_dir`'s (checkpoints of another run than `model_dir`'s
            would be exported with the wrong vocabulary, without a word),
            or if there is neither a vocabulary beside the checkpoints nor
            a `model_dir`.
        FileNotFoundError: if `model_dir` holds no vocabulary.
    """
    beside = {}
    for checkpoint in checkpoints:
        try:
            found = inference.vocab_beside(checkpoint, None)
        except FileNotFoundError:
            continue
        beside.setdefault(os.path.realpath(found), (checkpoint, found))
    if len(beside) > 1:
        (first, one), (second, other) = list(beside.values())[:2]
        raise ValueError(
            "The checkpoints come with different vocabularies, so they are "
            "of different runs, whose weights do not average; export "
            f"checkpoints of one run. Received: {first} beside {one}, "
            f"{second} beside {other}"
        )
    if model_dir:
        in_model_dir = model_files.find_vocab(model_dir)
        if beside and os.path.realpath(in_model_dir) not in beside:
            checkpoint, found = next(iter(beside.values()))
            raise ValueError(
                "The checkpoint's training run has another vocabulary than "
                "--model_dir; drop --model_dir (the checkpoint's own is then "
                "used), or pass --vocab PATH of its vocabulary. Received: "
                f"checkpoint={checkpoint} (beside {found}), model_dir "
                f"vocabulary={in_model_dir}"
            )
        return in_model_dir
    if not beside:
        raise ValueError(
            "Pass --vocab PATH (the sentencepiece *.model file) or "
            "--model_dir holding it; none is beside the checkpoints. "
            "Received: vocab=None, model_dir=None"
        )
    return next(iter(beside.values()))[1]


def export(
    model_dir,
    checkpoints,
    vocab,
    export_dir,
    model_name,
    version,
    beam_size,
    alpha,
    length_offset,
    overwrite,
    jit_compile=False,
    parallel_searches=transformer_search.DEFAULT_PARALLEL_SEARCHES,
    warmup=True,
    warmup_file=None,
    server_batching=False,
):
    """Loads the model and vocabulary and writes the SavedModel.

    The paths, the name and the version are checked before the (slow)
    model loading; the decoding settings by `Translator`, after it.

    Returns:
        The version directory written.

    Raises:
        ValueError: if neither `model_dir` nor `checkpoints` is given,
            `model_name`, `version`, the vocabulary or a checkpoint is
            invalid, `overwrite` would delete an input (one inside the
            version directory), or `warmup_file` is not a UTF-8 text file
            (see `text_files.read_sentences`) or is given with `warmup`
            False.
        FileNotFoundError: if `model_dir`, a checkpoint, the vocabulary or
            `warmup_file` does not exist.
        FileExistsError: if the version exists and `overwrite` is False.
    """
    if not checkpoints and not model_dir:
        raise ValueError(
            "Pass --model_dir (holding model.keras) or --checkpoint PATH. "
            "Received: model_dir=None, checkpoint=[]"
        )
    if model_dir and not tf.io.gfile.isdir(model_dir):
        raise FileNotFoundError(
            "The --model_dir directory does not exist; pass the directory "
            f"that training wrote. Received: model_dir={model_dir}"
        )
    path = serving.serving_path(export_dir, model_name, version)
    serving.check_export_path(path, overwrite)
    warmup_sentences = serving.WARMUP_SENTENCES if warmup else None
    if warmup_file and not warmup:
        raise ValueError(
            "--warmup_file gives the sentences of the warmup requests, which "
            "--nowarmup turns off; drop one of them. "
            f"Received: warmup_file={warmup_file}, warmup=False"
        )
    if warmup_file:
        warmup_sentences = text_files.read_sentences(warmup_file, "warmup_file")
    if not checkpoints:
        checkpoints = [os.path.join(model_dir, model_files.MODEL_FILE)]
        hint = inference.unfinished_run_hint(model_dir)
        if hint and not tf.io.gfile.exists(checkpoints[0]):
            raise FileNotFoundError(
                f"--model_dir holds no {model_files.MODEL_FILE}.{hint} Pass it "
                f"as --checkpoint. Received: model_dir={model_dir}"
            )
    if vocab:
        for checkpoint in checkpoints:
            inference.vocab_beside(checkpoint, vocab)  # Not another run's.
    else:
        vocab = default_vocab(model_dir, checkpoints)
    tokenizer = load_vocab(vocab)
    for checkpoint in checkpoints:
        model_files.check_model_file(checkpoint)
    if overwrite:
        _check_inputs_outside(path, [model_dir, vocab, *checkpoints])
    # Recorded with the export: `evaluate` scores in its target language.
    found = inference.model_languages(checkpoints[0])
    languages = found[0] if found else None
    translator = translator_lib.Translator(
        averaging.average_models(checkpoints),
        tokenizer,
        beam_size=beam_size,
        alpha=alpha,
        length_offset=length_offset,
        jit_compile=jit_compile,
        parallel_searches=parallel_searches,
    )
    return serving.export_translator(
        translator,
        path,
        overwrite=overwrite,
        warmup_sentences=warmup_sentences,
        languages=languages,
        server_batching=server_batching,
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        path = export(
            model_dir=FLAGS.model_dir,
            checkpoints=FLAGS.checkpoint,
            vocab=FLAGS.vocab,
            export_dir=FLAGS.export_dir,
            model_name=FLAGS.model_name,
            version=FLAGS.version,
            beam_size=FLAGS.beam_size,
            alpha=FLAGS.alpha,
            length_offset=FLAGS.length_offset,
            overwrite=FLAGS.overwrite,
            jit_compile=FLAGS.jit_compile,
            parallel_searches=FLAGS.parallel_searches,
            warmup=FLAGS.warmup,
            warmup_file=FLAGS.warmup_file,
            server_batching=FLAGS.server_batching,
        )
    except (ValueError, OSError, TypeError) as error:
        # User errors: one line, no TensorFlow traceback.
        return fail("export_model.py", error)
    print(f"Exported {path}")
    return 0


def run():
    """Entry point of `python -m keras_transformer.export_model`,
    of the installed `keras-transformer-export` command and of
    `export/export_model.py`."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
