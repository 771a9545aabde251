"""SavedModel export of a `Translator` for TF Serving, and reload helpers."""

import glob
import json
import os
import re
import zipfile

import keras
import tensorflow as tf
from google.protobuf import message
from tensorflow.core.protobuf import saved_model_pb2

from keras_transformer.checks import is_integer
from keras_transformer.model import Transformer

# What a training run writes into its model directory: the final model and
# the sentencepiece vocabulary.
MODEL_FILE = "model.keras"
VOCAB_FILE = "vocab.model"

# Signature names of the export (see `export/README.md`).
DEFAULT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"
OPTIONS_SIGNATURE = "translate_with_options"

_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# The first bytes of a `.keras` file (a zip archive).
_ZIP_MAGIC = b"PK\x03\x04"


def serving_signatures(translator) -> dict:
    """The three signatures of a `Translator`, keyed by signature name.

    Args:
        translator: a `keras_transformer.decoding.translator.Translator`.

    Returns:
        dict of `serving_default` (strings -> best translations),
        `translate_ids` (token ids -> token ids) and
        `translate_with_options` (strings, alpha, length offset, n ->
        n-best translations) concrete functions.
    """
    return {
        DEFAULT_SIGNATURE: translator.translate.get_concrete_function(),
        IDS_SIGNATURE: translator.translate_ids.get_concrete_function(),
        OPTIONS_SIGNATURE: (translator.translate_with_options.get_concrete_function()),
    }


def serving_path(base_dir: str, model_name: str, version: int) -> str:
    """The TF Serving layout `<base_dir>/<model_name>/<version>`.

    Raises:
        ValueError: if `version` is not a positive integer or `model_name`
            is not a plain name (letters, digits, `_`, `.`, `-`).
    """
    if not is_integer(version) or version < 1:
        raise ValueError(
            "`version` must be a positive integer: TF Serving loads the "
            "numerically highest version directory. "
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
    parent = os.path.dirname(os.path.normpath(path))
    while parent and not tf.io.gfile.exists(parent):
        parent = os.path.dirname(parent)
    if not parent:
        return
    if not tf.io.gfile.isdir(parent):
        raise NotADirectoryError(
            f"{parent} is a file, so the export directory cannot be created "
            "under it; pass a directory as the export base (--export_dir). "
            f"Received: path={path}"
        )
    if "://" not in parent and not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(
            f"{parent} cannot be written, so the export directory cannot be "
            "created in it; pass a writable export base (--export_dir). "
            f"Received: path={path}"
        )


def export_translator(translator, path: str, overwrite: bool = False) -> str:
    """Saves a `Translator` as a SavedModel with its three signatures.

    Only inference state is saved: the model weights and the tokenizer's
    sentencepiece model (no optimizer, no Keras objects), so the SavedModel
    loads where only `tensorflow` and `tensorflow_text` are installed. The
    directory appears at once when complete (written beside it, then
    renamed), so a TF Serving instance that polls the base directory never
    loads a half-written version.

    Args:
        translator: the `Translator` to export.
        path: the version directory, e.g. from `serving_path`.
        overwrite: replace an existing directory at `path`.

    Returns:
        `path`.

    Raises:
        FileExistsError: if `path` exists and `overwrite` is False.
    """
    check_export_path(path, overwrite)
    partial = path.rstrip("/") + ".partial"
    if tf.io.gfile.exists(partial):
        tf.io.gfile.rmtree(partial)
    tf.saved_model.save(translator, partial, signatures=serving_signatures(translator))
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
    tf.io.gfile.rename(partial, path)
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


def check_model_file(path: str) -> None:
    """Fails early when a `.keras` model file is missing or is not one
    (before loading: Keras says "File not found" of a file that is not a
    zip archive or is a truncated one, and of a directory that it is a
    legacy SavedModel).

    Raises:
        FileNotFoundError: if `path` does not exist.
        IsADirectoryError: if `path` is a directory.
        ValueError: if the file is not a `.keras` zip archive, is a damaged
            one (e.g. truncated), or cannot be read.
    """
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            "No model file at this path; pass the `.keras` file written by "
            f"training. Received: path={path}"
        )
    if tf.io.gfile.isdir(path):
        raise IsADirectoryError(
            "The model path is a directory, not a `.keras` file; pass the "
            "`.keras` file written by training (e.g. <model_dir>/model.keras). "
            f"Received: path={path}"
        )
    try:
        with tf.io.gfile.GFile(path, "rb") as file:
            magic = file.read(len(_ZIP_MAGIC))
            # A zip archive ends with its index, an end record of at least
            # 22 bytes (shorter files make GFile's seek fail): a truncated
            # archive has none.
            whole = file.size() >= 22 and zipfile.is_zipfile(file)
    except tf.errors.OpError as error:
        raise ValueError(
            f"The model file cannot be read ({error.message}). Received: path={path}"
        ) from None
    if magic != _ZIP_MAGIC:
        raise ValueError(
            "The file is not a `.keras` model (a zip archive), e.g. a "
            "vocabulary or a truncated copy; pass the `.keras` file written "
            f"by training. Received: path={path}"
        )
    if not whole:
        raise _damaged_model_file(path)


def _damaged_model_file(path: str) -> ValueError:
    """The error for a `.keras` file that starts as one but is damaged."""
    return ValueError(
        "The `.keras` file is damaged (e.g. truncated or corrupted): it is "
        "not a whole Keras zip archive. Use another checkpoint of the run, "
        f"or rerun training from the last good one. Received: path={path}"
    )


def load_model(path: str) -> Transformer:
    """Loads a trained `Transformer` from a `.keras` file, without optimizer.

    Raises:
        FileNotFoundError: if `path` does not exist.
        IsADirectoryError, ValueError: if it is not a `.keras` file or is a
            damaged one (see `check_model_file`).
        TypeError: if the file does not hold a `keras_transformer`
            Transformer.
    """
    check_model_file(path)
    try:
        model = keras.saving.load_model(path, compile=False)
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError):
        # Whole, but a member's bytes were changed (a bad CRC-32), a member
        # is missing (KeyError: config.json) or its JSON is broken.
        raise _damaged_model_file(path) from None
    except ValueError as error:
        # E.g. "Expected a model.weights.h5 or model.weights.npz file.",
        # which names no file.
        raise ValueError(
            f"Keras cannot load the `.keras` file ({error}); pass a `.keras` "
            "file written by training, or another checkpoint of the run. "
            f"Received: path={path}"
        ) from None
    if not isinstance(model, Transformer):
        raise TypeError(
            "The file must hold a keras_transformer Transformer (built by "
            "`build_transformer`). "
            f"Received: path={path}, type={type(model).__name__}"
        )
    return model


def find_vocab(model_dir: str) -> str:
    """The sentencepiece vocabulary of `model_dir`: the `VOCAB_FILE` that
    training writes there, else its one `*.model` file.

    Raises:
        FileNotFoundError: if there is none.
        ValueError: if there is no `VOCAB_FILE` and several `*.model` files:
            taking one of them could translate with the wrong vocabulary.
    """
    written = os.path.join(model_dir, VOCAB_FILE)
    if tf.io.gfile.exists(written):
        return written
    found = sorted(glob.glob(os.path.join(model_dir, "*.model")))
    if not found:
        raise FileNotFoundError(
            "No sentencepiece `*.model` vocabulary in the model directory; "
            f"pass --vocab PATH. Received: model_dir={model_dir}"
        )
    if len(found) > 1:
        names = ", ".join(os.path.basename(path) for path in found)
        raise ValueError(
            f"The model directory holds several sentencepiece `*.model` "
            f"files and no {VOCAB_FILE} (the one training writes), so which "
            f"vocabulary is the model's is unclear; pass --vocab PATH. "
            f"Received: model_dir={model_dir}, files={names}"
        )
    return found[0]
