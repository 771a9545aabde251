"""SavedModel export of a `Translator` for TF Serving, and its reloading."""

import json
import os
import re
import uuid

import numpy as np
import tensorflow as tf
from google.protobuf import message
from tensorflow.core.protobuf import saved_model_pb2

from keras_transformer import files, warmup
from keras_transformer.checks import is_integer

# Signature names of the export (see `export/README.md`).
DEFAULT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"
OPTIONS_SIGNATURE = "translate_with_options"
# The signatures whose every input and output has a first, batch axis: all
# that a TF Serving started with --enable_batching can serve. Its batcher
# wraps every signature of a version and refuses a scalar input ("Batching
# Run() input tensors must have at least one dimension"), such as the
# options of `translate_with_options`.
BATCHED_SIGNATURES = (DEFAULT_SIGNATURE, IDS_SIGNATURE)

# The sentences of the warmup requests written with an export: a short and a
# typical one, so that each of the default two parallel searches decodes one.
# Any text runs every op of a signature.
WARMUP_SENTENCES = (
    "Hello.",
    "The committee will meet again on the fourth of May to discuss the report.",
)

# TF Serving parses version directory names as int64.
_MAX_VERSION = 2**63 - 1
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def serving_signatures(translator, server_batching: bool = False) -> dict:
    """The signatures of a `Translator`, keyed by signature name.

    Args:
        translator: a `keras_transformer.decoding.translator.Translator`.
        server_batching: only `BATCHED_SIGNATURES`, for a TF Serving that
            batches requests (--enable_batching).

    Returns:
        dict of `serving_default` (strings -> best translations),
        `translate_ids` (token ids -> token ids) and, without
        `server_batching`, `translate_with_options` (strings, alpha, length
        offset, n -> n-best translations) concrete functions.
    """
    signatures = {
        DEFAULT_SIGNATURE: translator.translate.get_concrete_function(),
        IDS_SIGNATURE: translator.translate_ids.get_concrete_function(),
    }
    if not server_batching:
        signatures[OPTIONS_SIGNATURE] = (
            translator.translate_with_options.get_concrete_function()
        )
    return signatures


def warmup_inputs(translator, sentences=WARMUP_SENTENCES) -> dict:
    """One request to each signature of a `Translator`'s export.

    Args:
        translator: the exported `Translator`.
        sentences: the requests' sentences, a non-empty sequence of str.

    Returns:
        dict of signature name -> dict of input name -> numpy array: the
        sentences, their token ids for `translate_ids` (as a client that
        tokenizes with the vocabulary sends them) and the export's default
        decoding options.

    Raises:
        ValueError: if `sentences` is empty or not strings.
    """
    if (
        isinstance(sentences, (str, bytes))
        or not sentences
        or not all(isinstance(sentence, str) for sentence in sentences)
    ):
        raise ValueError(
            "The warmup sentences must be a non-empty list of strings. "
            f"Received: sentences={sentences!r}"
        )
    strings = np.array(
        [sentence.encode("utf-8") for sentence in sentences], object
    )
    ids = translator.tokenizer.tokenize(tf.constant(strings)).to_tensor()
    return {
        DEFAULT_SIGNATURE: {"inputs": strings},
        IDS_SIGNATURE: {"source_ids": ids.numpy().astype(np.int32)},
        OPTIONS_SIGNATURE: {
            "inputs": strings,
            "alpha": np.float32(translator.alpha),
            "length_offset": np.int32(translator.length_offset),
            "num_hypotheses": np.int32(translator.beam_size),
        },
    }


def serving_path(base_dir: str, model_name: str, version: int) -> str:
    """The TF Serving layout `<base_dir>/<model_name>/<version>`.

    Raises:
        ValueError: if `base_dir` is empty, `version` is not a positive
            integer of int64 (TF Serving's version numbers) or `model_name`
            is not a plain name (letters, digits, `_`, `.`, `-`).
    """
    if not isinstance(base_dir, str) or not base_dir:
        # "" would export into the working directory, without a word.
        raise ValueError(
            "The export base directory (--export_dir) must name a directory "
            f"(TF Serving's model base). Received: base_dir={base_dir!r}"
        )
    if not is_integer(version) or not 1 <= version <= _MAX_VERSION:
        raise ValueError(
            "`version` must be a positive integer of at most 2**63 - 1: TF "
            "Serving reads version directories as int64 numbers and loads "
            "the highest. "
            f"Received: version={version!r}"
        )
    if not isinstance(model_name, str) or not _MODEL_NAME.match(model_name):
        raise ValueError(
            "`model_name` must be a plain name of letters, digits, '_', '.' "
            "or '-' (it is a directory and the REST path /v1/models/<name>). "
            f"Received: model_name={model_name!r}"
        )
    # int(): numpy integers pass; the directory is the plain number.
    return os.path.join(base_dir, model_name, str(int(version)))


def check_export_path(path: str, overwrite: bool = False) -> None:
    """Fails early when an export would replace an existing version.

    Raises:
        FileExistsError: if `path` exists and `overwrite` is False, or is a
            file.
        NotADirectoryError: if a parent of `path` is a file.
        PermissionError: if the directory it would be created in (a local
            one) cannot be written.
    """
    if tf.io.gfile.exists(path) and not overwrite:
        raise FileExistsError(
            "The export directory already exists; choose a new "
            "`version` or pass overwrite=True (--overwrite). "
            f"Received: path={path}"
        )
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        # Else the export fails after loading, in TensorFlow's rmtree.
        raise FileExistsError(
            "A file has the name of the export directory, and --overwrite "
            "replaces only a version directory; move the file away or "
            f"choose a new `version`. Received: path={path}"
        )
    # normpath would make "gs://b/m/1" the local "gs:/b/m/1"; a URL's walk
    # stops at its scheme ("gs:").
    remote = files.is_remote(path)
    parent = os.path.dirname(
        path.rstrip("/") if remote else os.path.normpath(path)
    )
    while (
        parent and not parent.endswith(":") and not tf.io.gfile.exists(parent)
    ):
        parent = os.path.dirname(parent)
    if not parent or parent.endswith(":"):
        return
    if not tf.io.gfile.isdir(parent):
        raise NotADirectoryError(
            f"{parent} is a file, so the export directory cannot be created "
            "under it; pass a directory as the export base (--export_dir). "
            f"Received: path={path}"
        )
    if not remote and not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(
            f"{parent} cannot be written, so the export directory cannot be "
            "created in it; pass a writable export base (--export_dir). "
            f"Received: path={path}"
        )


# The export's languages, beside TF Serving's warmup requests (it reads no
# other file there): `evaluate` scores an export in its target language.
LANGUAGES_FILE = os.path.join("assets.extra", "languages.json")
LANGUAGE_KEYS = ("src_lang", "tgt_lang")


def write_languages(path: str, languages: dict) -> None:
    """Records `languages` ({"src_lang": ..., "tgt_lang": ...}) in the
    SavedModel directory `path`."""
    tf.io.gfile.makedirs(os.path.dirname(os.path.join(path, LANGUAGES_FILE)))
    with tf.io.gfile.GFile(os.path.join(path, LANGUAGES_FILE), "w") as file:
        json.dump({name: languages[name] for name in LANGUAGE_KEYS}, file)


def read_languages(path: str) -> dict | None:
    """The languages `write_languages` recorded in the SavedModel `path`, or
    None (an export without them, e.g. of a model trained elsewhere).

    Raises:
        ValueError: if the file is not what `write_languages` writes.
    """
    file_path = os.path.join(path, LANGUAGES_FILE)
    if not tf.io.gfile.exists(file_path):
        return None
    with tf.io.gfile.GFile(file_path) as file:
        try:
            languages = json.load(file)
        except ValueError:
            languages = None
    if not (
        isinstance(languages, dict)
        and all(isinstance(languages.get(name), str) for name in LANGUAGE_KEYS)
    ):
        raise ValueError(
            f"The export's languages file is damaged; export the model again, "
            f"or delete the file and pass --src_lang and --tgt_lang. "
            f"Received: {file_path}"
        )
    return {name: languages[name] for name in LANGUAGE_KEYS}


def export_translator(
    translator,
    path: str,
    overwrite: bool = False,
    warmup_sentences=WARMUP_SENTENCES,
    languages: dict | None = None,
    server_batching: bool = False,
) -> str:
    """Saves a `Translator` as a SavedModel with its signatures.

    Only inference state is saved: the model weights and the tokenizer's
    sentencepiece model (no optimizer, no Keras objects), so the SavedModel
    loads where only `tensorflow` and `tensorflow_text` are installed. The
    directory appears at once when complete (written beside it under a name
    of its own, then renamed), so a TF Serving instance that polls the base
    directory never loads a half-written version; on a filesystem whose
    rename of a directory is a copy (e.g. `gs://`), only when the polling
    falls outside the copy. With it go TF Serving's warmup requests
    (`warmup.WARMUP_FILE`), one per signature, which TF Serving runs when it
    loads the version, before serving it: the first request of each
    signature would otherwise pay for instantiating its functions and
    creating their kernels.

    Args:
        translator: the `Translator` to export.
        path: the version directory, e.g. from `serving_path`.
        overwrite: replace an existing directory at `path` (moved aside,
            then deleted once the new one is in place). TF Serving does not
            reload a version it serves when its files change: export a new
            version to roll out a model.
        warmup_sentences: the warmup requests' sentences (`warmup_inputs`),
            or None to write none.
        languages: {"src_lang": ..., "tgt_lang": ...} to record
            (`read_languages`), or None.
        server_batching: export only `BATCHED_SIGNATURES` and their warmup
            requests, for a TF Serving started with --enable_batching: it
            would refuse the version, whose `translate_with_options` warmup
            request it cannot batch.

    Returns:
        `path`.

    Raises:
        FileExistsError: if `path` exists and `overwrite` is False.
        ValueError: if `warmup_sentences` is not a list of strings.
    """
    check_export_path(path, overwrite)
    requests = None
    if warmup_sentences is not None:
        requests = warmup_inputs(translator, warmup_sentences)
    signatures = serving_signatures(translator, server_batching)
    if requests is not None:
        requests = {name: requests[name] for name in signatures}
    # Beside the version, under names of this export's own (TF Serving
    # loads only numeric names): nothing that exists is ever written over,
    # and two exports of one version do not share a staging directory.
    tag = uuid.uuid4().hex[:12]
    partial = f"{path.rstrip('/')}.partial-{tag}"
    try:
        tf.saved_model.save(translator, partial, signatures=signatures)
        if requests is not None:
            warmup.write_warmup_requests(partial, requests)
        if languages is not None:
            write_languages(partial, languages)
    except BaseException:
        if tf.io.gfile.exists(partial):
            tf.io.gfile.rmtree(partial)
        raise
    replaced = None
    if tf.io.gfile.exists(path):
        # Moved aside, not deleted, before the new version moves in: the
        # version directory is missing for two renames, not for a deletion.
        replaced = f"{path.rstrip('/')}.replaced-{tag}"
        tf.io.gfile.rename(path, replaced)
    tf.io.gfile.rename(partial, path)
    if replaced is not None:
        tf.io.gfile.rmtree(replaced)
    return path


def read_saved_model(path: str):
    """The `saved_model.pb` of the SavedModel directory `path`, as a protocol
    buffer (TensorFlow's runtime does not start, so its thread settings stay
    open).

    Raises:
        ValueError: if `saved_model.pb` is not a SavedModel.
    """
    saved_model = saved_model_pb2.SavedModel()
    file_path = os.path.join(path, "saved_model.pb")
    with tf.io.gfile.GFile(file_path, "rb") as file:
        try:
            saved_model.ParseFromString(file.read())
        except message.DecodeError:
            raise ValueError(
                "The file is not a SavedModel (damaged, or not written by "
                f"tf.saved_model.save); export it again. Received: {file_path}"
            ) from None
    return saved_model


def needs_tensorflow_text(path: str) -> bool:
    """Whether the SavedModel at `path` uses ops that TensorFlow itself lacks
    (its tokenizer's sentencepiece ops: every `Translator` export), which
    `tensorflow_text` registers.

    Raises:
        ValueError: if `saved_model.pb` is not a SavedModel.
    """
    return any(
        not hasattr(tf.raw_ops, op.name)
        for graph in read_saved_model(path).meta_graphs
        for op in graph.meta_info_def.stripped_op_list.op
    )


def load_exported(path: str):
    """Loads an exported SavedModel, with the tensorflow-text ops it uses.

    `tensorflow_text` (~116 MiB of resident libraries) is imported only for
    a SavedModel with ops TensorFlow lacks: a `Translator` export has them,
    an ids-only one (the benchmarks' decoder) does not.

    Returns:
        The loaded object; `.signatures[name]` are the serving signatures
        and `.translate`, `.translate_ids`, `.translate_with_options` the
        functions.

    Raises:
        ValueError: if `saved_model.pb` is not a SavedModel.
    """
    if needs_tensorflow_text(path):
        import tensorflow_text  # noqa: F401  (registers the sentencepiece ops)

    return tf.saved_model.load(path)
