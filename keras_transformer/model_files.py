"""The files a training run writes into its model directory, the final
`.keras` model and the sentencepiece vocabulary, and their checked loading
(also of `.keras` checkpoints and averaged models)."""

import json
import os
import zipfile

import keras
import tensorflow as tf

from keras_transformer.model import Transformer

MODEL_FILE = "model.keras"
# The model of the highest dev BLEU (`callbacks.KeepBestModel`).
BEST_MODEL_FILE = "best_model.keras"
VOCAB_FILE = "vocab.model"

# The first bytes of a `.keras` file (a zip archive).
_ZIP_MAGIC = b"PK\x03\x04"


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
            f"The model file cannot be read ({error.message}). "
            f"Received: path={path}"
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
    found = sorted(tf.io.gfile.glob(os.path.join(model_dir, "*.model")))
    if not found:
        raise FileNotFoundError(
            "No sentencepiece `*.model` vocabulary in the model directory; "
            "pass its path as `vocab` (--vocab). "
            f"Received: model_dir={model_dir}"
        )
    if len(found) > 1:
        names = ", ".join(os.path.basename(path) for path in found)
        raise ValueError(
            f"The model directory holds several sentencepiece `*.model` "
            f"files and no {VOCAB_FILE} (the one training writes), so which "
            f"vocabulary is the model's is unclear; pass its path as `vocab` "
            "(--vocab). "
            f"Received: model_dir={model_dir}, files={names}"
        )
    return found[0]
