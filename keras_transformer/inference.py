"""One loader for every kind of trained model the commands accept.

A `--model` path may be a training directory (`model.keras` + `*.model`
vocabulary), a `.keras` checkpoint (e.g. `checkpoints/ckpt-5000.keras` or an
averaged model), an exported SavedModel version directory, or a TF Serving
model directory of numbered versions (the highest is used).
"""

import os
import re

import tensorflow as tf

from keras_transformer import evaluation, files, model_files, serving
from keras_transformer.decoding import text_batches, transformer_search
from keras_transformer.decoding import translator as translator_lib
from keras_transformer.training import callbacks, run_checks


class TextTranslator:
    """Translates lists of sentences with a loaded model.

    Args:
        translate_fn: `tf.string` [B] -> dict with `outputs` [B].
        description: what was loaded (for messages).
        owner: the object `translate_fn` belongs to, kept alive here (a
            `tf.function` method holds its module only weakly).
    """

    def __init__(self, translate_fn, description: str, owner=None):
        self.translate_fn = translate_fn
        self.description = description
        self.owner = owner

    def translate(self, sentences, batch_size: int = 32, on_batch=None):
        """Translations of `sentences` (`list[str]`), in order."""
        return text_batches.translate_texts(
            self.translate_fn, sentences, batch_size, on_batch
        )

    def perplexity(self, sources, references):
        """`evaluation.perplexity` of `references` given `sources`, or None
        for a SavedModel (its signatures search; none scores a reference)."""
        if not isinstance(self.owner, translator_lib.Translator):
            return None
        return evaluation.perplexity(
            self.owner.model, self.owner.tokenizer, sources, references
        )


def _is_saved_model(path):
    return tf.io.gfile.exists(os.path.join(path, "saved_model.pb"))


def _latest_version(path):
    """The highest numbered SavedModel directory in `path`, as TF Serving
    picks it (by the number: "010" is version 10), or None."""
    names = [name.rstrip("/") for name in tf.io.gfile.listdir(path)]
    versions = [
        (int(name), name)
        for name in names
        if re.fullmatch("[0-9]+", name)
        and _is_saved_model(os.path.join(path, name))
    ]
    return os.path.join(path, max(versions)[1]) if versions else None


def export_path(path: str) -> str | None:
    """The SavedModel directory that a `--model` path names, else None."""
    if not tf.io.gfile.isdir(path):
        return None
    return path if _is_saved_model(path) else _latest_version(path)


def search_settings(export: str) -> tuple[int, bool]:
    """How a SavedModel searches: (parallel searches, compiled with XLA).

    The searches are the beam-search loops (`While` ops) of its largest
    function; XLA shows as a function marked `_XlaMustCompile`. Reads
    `saved_model.pb` as a protocol buffer (`serving.read_saved_model`), so
    TensorFlow's runtime does not start (its thread settings stay open).

    Raises:
        ValueError: if `saved_model.pb` is not a SavedModel.
    """
    functions = [
        function
        for graph in serving.read_saved_model(export).meta_graphs
        for function in graph.graph_def.library.function
    ]
    searches = max(
        (
            sum(
                node.op in ("While", "StatelessWhile")
                for node in function.node_def
            )
            for function in functions
        ),
        default=1,
    )
    xla = any(function.attr["_XlaMustCompile"].b for function in functions)
    return max(searches, 1), xla


def decoding_threads(path: str, intra_op_threads: int | None = None) -> int:
    """TensorFlow's threads per op for decoding with the model at `path`.

    Without XLA a batch is split into searches run side by side (a `.keras`
    model here gets `DEFAULT_PARALLEL_SEARCHES`, an export what it was
    exported with); with one thread per op each op runs whole on its
    search's thread instead of all sharing one pool (2 cores, 2 searches,
    small SavedModel, batch 32: 265-311 against 388-420 ms a call). So the
    default leaves each search its share of the cores. XLA's single search
    is slower with one thread (small, batch 32: 629-657 against 482-616 ms),
    so an export compiled with XLA keeps TensorFlow's default (0).

    Args:
        path: the `--model` path (see `load_translator`).
        intra_op_threads: an explicit setting (0: TensorFlow's default),
            returned as it is; None for the default above.

    Raises:
        ValueError: if the path holds a damaged `saved_model.pb`.
    """
    if intra_op_threads is not None:
        return intra_op_threads
    export = export_path(path)
    searches, xla = (
        search_settings(export)
        if export
        else (transformer_search.DEFAULT_PARALLEL_SEARCHES, False)
    )
    if xla:
        return 0
    if hasattr(os, "sched_getaffinity"):  # The cores this process may use.
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    return max(1, cores // searches)


def set_decoding_threads(path: str, intra_op_threads: int | None = None) -> int:
    """Sets `decoding_threads(path, intra_op_threads)` in TensorFlow and
    returns it; call before its first op (the setting is fixed once its
    runtime starts)."""
    threads = decoding_threads(path, intra_op_threads)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    return threads


def model_folders(keras_file: str) -> list[str]:
    """Where the files of a `.keras` model's training run may be: its own
    directory and, for a checkpoint (`<model_dir>/checkpoints/`, the
    trainer's layout), the run's directory."""
    folder = os.path.dirname(files.absolute(keras_file))
    if os.path.basename(folder) == callbacks.CHECKPOINT_DIR:
        return [folder, os.path.dirname(folder)]
    return [folder]


def run_folder(model: str) -> str | None:
    """The training run directory of `model` (the one holding its settings
    file): `model` if it is a directory, else beside the `.keras` file or,
    for a checkpoint, one level up (`model_folders`), where its vocabulary
    is found too; None if there is none (e.g. an exported SavedModel)."""
    if tf.io.gfile.isdir(model):
        folders = [model]
    elif tf.io.gfile.exists(model):
        folders = model_folders(model)
    else:  # Missing: `load_translator` says so.
        return None
    for folder in folders:
        if tf.io.gfile.exists(os.path.join(folder, run_checks.SETTINGS_FILE)):
            return folder
    return None


def model_languages(model: str) -> tuple[dict, str] | None:
    """The languages `model` translates between: an export's record
    (`serving.read_languages`), else its training run's settings
    (`run_folder`).

    Returns:
        ({"src_lang": ..., "tgt_lang": ...}, the file they were read from),
        or None when neither holds them (an export of a model trained
        elsewhere, a `.keras` file outside a training run).

    Raises:
        ValueError: if the settings or languages file is malformed.
    """
    export = export_path(model)
    if export is not None:
        languages = serving.read_languages(export)
        where = os.path.join(export, serving.LANGUAGES_FILE)
        return (languages, where) if languages else None
    folder = run_folder(model)
    if folder is None:
        return None
    settings = run_checks.read_settings(folder)
    languages = {
        name: settings[name]
        for name in ("src_lang", "tgt_lang")
        if name in settings
    }
    where = os.path.join(folder, run_checks.SETTINGS_FILE)
    return (languages, where) if len(languages) == 2 else None


def vocab_beside(checkpoint, vocab):
    """The vocabulary for a `.keras` file: `vocab`, or the one of its
    directory (`model_files.find_vocab`), or for a checkpoint of a training run
    (`<model_dir>/checkpoints/ckpt-<step>.keras`) in the run's directory.
    No other directory is searched: a `*.model` file of an unrelated
    directory above would translate silently wrong.

    Raises:
        FileNotFoundError: if `vocab` is not given and none is found.
        ValueError: if `vocab` is given but the model's training run wrote
            another vocabulary (`model_files.VOCAB_FILE`) beside it.
    """
    if vocab:
        _check_run_vocab(checkpoint, vocab)
        return vocab
    folders = model_folders(checkpoint)
    for candidate in folders:
        try:
            return model_files.find_vocab(candidate)
        except FileNotFoundError:
            continue
    where = " or in its training run's directory" if len(folders) > 1 else ""
    raise FileNotFoundError(
        f"No sentencepiece `*.model` vocabulary beside the model{where}; "
        f"pass its path as `vocab` (--vocab). Received: model={checkpoint}"
    )


def _check_run_vocab(checkpoint, vocab) -> None:
    """Raises a ValueError if `checkpoint` belongs to a training run (a
    directory with its settings file, `run_folder`) whose vocabulary
    (`model_files.VOCAB_FILE`) has other pieces than `vocab`: a vocabulary of
    another run, of the same size, would translate wrong without an error.
    A `vocab` that cannot be read, or has no pieces, is left to the
    loader's error."""
    from keras_transformer.data.tokenizer import vocabulary_pieces

    run = run_folder(checkpoint)
    own = None if run is None else os.path.join(run, model_files.VOCAB_FILE)
    if own is None or not tf.io.gfile.exists(own):
        return
    if os.path.realpath(own) == os.path.realpath(vocab):
        return
    try:
        pieces = vocabulary_pieces(vocab)
    except (OSError, RuntimeError, tf.errors.OpError):
        return
    if pieces and pieces != vocabulary_pieces(own):
        raise ValueError(
            "`vocab` (--vocab) is not the vocabulary the model was trained "
            f"with: its training run wrote {own}, whose pieces differ. Drop "
            "`vocab` to use the run's own (or pass a copy of it). "
            f"Received: vocab={vocab}, model={checkpoint}"
        )


def unfinished_run_hint(model_dir: str) -> str:
    """A sentence naming the newest checkpoint of a training directory
    whose run has not written `model.keras` (it trains still, or was
    stopped), or "" if it has no checkpoint."""
    found = callbacks.list_checkpoints(
        os.path.join(model_dir, callbacks.CHECKPOINT_DIR)
    )
    if not found:
        return ""
    step, path = found[-1]
    return (
        f" Its training run has not finished: use its newest checkpoint, "
        f"{path} (step {step}), or average its checkpoints "
        "(python -m keras_transformer.average_checkpoints)."
    )


def _check_translation_signature(loaded, export: str) -> None:
    """Fails unless `loaded` (the SavedModel at `export`) has a
    `serving_default` signature taking `inputs`, a batch of strings, as
    `keras_transformer.export_model` writes it: another program's SavedModel
    gives a KeyError or a TypeError traceback from TensorFlow otherwise."""
    signatures = loaded.signatures
    if serving.DEFAULT_SIGNATURE not in signatures:
        raise ValueError(
            f"The SavedModel has no `{serving.DEFAULT_SIGNATURE}` "
            f"signature (it has: {', '.join(signatures) or 'none'}), "
            "so it is not a translation export; pass one written by "
            f"keras_transformer.export_model. Received: model={export}"
        )
    inputs = signatures[serving.DEFAULT_SIGNATURE].structured_input_signature[1]
    if set(inputs) != {"inputs"} or inputs["inputs"].dtype != tf.string:
        taken = ", ".join(
            f"{name} ({spec.dtype.name})" for name, spec in inputs.items()
        )
        raise ValueError(
            f"The SavedModel's `{serving.DEFAULT_SIGNATURE}` signature takes "
            f"{taken or 'nothing'}, not `inputs` (a batch of strings), so it "
            "is not a translation export; pass one written by "
            f"keras_transformer.export_model. Received: model={export}"
        )


def check_model_path(path: str) -> None:
    """Raises FileNotFoundError if the `--model` path does not exist."""
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            "The model path does not exist; pass a training directory, a "
            f".keras file or a SavedModel directory. Received: model={path}"
        )


def load_translator(
    path: str,
    vocab: str | None = None,
    beam_size: int | None = None,
    alpha: float | None = None,
    length_offset: int | None = None,
) -> TextTranslator:
    """Loads a model for translation (see the module docstring).

    Args:
        path: the `--model` path.
        vocab: the sentencepiece model for a `.keras` model (default: found
            beside it).
        beam_size: beam size K for a `.keras` model (default: the paper's
            4, as `Translator`'s).
        alpha: length penalty strength for a `.keras` model (default: 0.6).
        length_offset: output tokens allowed beyond the input length for a
            `.keras` model (default: 50).

    Returns:
        A `TextTranslator`.

    Raises:
        FileNotFoundError: if `path` does not exist or holds no model.
        ValueError: if a SavedModel there has no `serving_default`
            signature, or is given a `vocab` or a decoding setting (it holds
            its own), or a setting is out of range (`Translator`).
    """
    check_model_path(path)
    settings = {
        name: value
        for name, value in (
            ("beam_size", beam_size),
            ("alpha", alpha),
            ("length_offset", length_offset),
        )
        if value is not None
    }
    if tf.io.gfile.isdir(path):
        export = export_path(path)
        passed = {"vocab": vocab, **settings} if vocab else settings
        if export and passed:
            # An export holds its tokenizer and decoding settings: the flags
            # would be ignored.
            names = ", ".join(f"`{name}`" for name in passed)
            received = ", ".join(f"{k}={v}" for k, v in passed.items())
            raise ValueError(
                f"{names} {'applies' if len(passed) == 1 else 'apply'} to "
                "`.keras` models; a SavedModel holds its own tokenizer and "
                "decoding settings (export_model's --beam_size, --alpha and "
                "--length_offset; its translate_with_options signature takes "
                f"alpha and the length offset per request), so drop {names} "
                "or pass the training directory or .keras model. "
                f"Received: model={path}, {received}"
            )
        if export:
            loaded = serving.load_exported(export)
            _check_translation_signature(loaded, export)
            return TextTranslator(
                loaded.signatures[serving.DEFAULT_SIGNATURE],
                f"SavedModel {export}",
                owner=loaded,
            )
        keras_file = os.path.join(path, model_files.MODEL_FILE)
        if not tf.io.gfile.exists(keras_file):
            raise FileNotFoundError(
                "The directory holds no model: no model.keras, no "
                "saved_model.pb and no numbered SavedModel versions."
                f"{unfinished_run_hint(path)} Received: model={path}"
            )
        path = keras_file
    from keras_transformer.data.tokenizer import SubwordTokenizer

    translator = translator_lib.Translator(
        model_files.load_model(path),
        SubwordTokenizer.from_file(vocab_beside(path, vocab)),
        **settings,
    )
    return TextTranslator(
        translator.translate,
        f"Keras model {path} (beam {translator.beam_size}, alpha "
        f"{translator.alpha}, length offset {translator.length_offset})",
        owner=translator,
    )
