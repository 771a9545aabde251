"""Checkpoint averaging, as the paper's section 6.1 does for its results."""

import os

import numpy as np
import tensorflow as tf

from keras_transformer import files
from keras_transformer.model import Transformer
from keras_transformer.model_files import (
    BEST_MODEL_FILE,
    MODEL_FILE,
    load_model,
)
from keras_transformer.training.callbacks import (
    CHECKPOINT_DIR,
    list_checkpoints,
)


def average_models(paths: list[str]) -> Transformer:
    """Loads checkpoints and averages their weights (paper, section 6.1).

    Args:
        paths: `.keras` files of one model at different steps, e.g. the last
            5 (base) or 20 (big) checkpoints.

    Returns:
        The first model with every weight replaced by the mean over `paths`.

    Raises:
        ValueError: if `paths` is empty or the checkpoints' configs differ.
    """
    if not paths:
        raise ValueError(
            "`paths` must name at least one `.keras` checkpoint. "
            f"Received: paths={paths!r}"
        )
    model = load_model(paths[0])
    total = [np.asarray(w, np.float64) for w in model.get_weights()]
    for path in paths[1:]:
        other = load_model(path)
        if other.config != model.config:
            raise ValueError(
                "Averaged checkpoints must share one model config; pass "
                "checkpoints of one training run. "
                f"Received: paths[0]={paths[0]}, path={path}"
            )
        for index, weight in enumerate(other.get_weights()):
            total[index] += weight
    model.set_weights(
        [
            (t / len(paths)).astype(w.dtype)
            for t, w in zip(total, model.get_weights())
        ]
    )
    return model


def last_checkpoints(
    model_dir: str, num_checkpoints: int | None = None
) -> list[str]:
    """The newest `num_checkpoints` `ckpt-<step>.keras` files of a run.

    Args:
        model_dir: the training directory (checkpoints are in its
            `checkpoints/` subdirectory).
        num_checkpoints: how many (paper: 5 for base, 20 for big); by
            default all the run kept (`train.py` keeps the paper's count
            for its preset).

    Returns:
        Their paths, oldest first.

    Raises:
        ValueError: if `num_checkpoints` < 1 or the run kept fewer.
    """
    if num_checkpoints is not None and num_checkpoints < 1:
        raise ValueError(
            "`num_checkpoints` must be at least 1. "
            f"Received: num_checkpoints={num_checkpoints}"
        )
    checkpoint_dir = os.path.join(model_dir, CHECKPOINT_DIR)
    found = list_checkpoints(checkpoint_dir)
    if not found:
        raise ValueError(
            f"No checkpoints in {checkpoint_dir} (no ckpt-<step>.keras "
            "files): pass the directory of a training run as model_dir. "
            f"Received: model_dir={model_dir}"
        )
    if num_checkpoints is None:
        num_checkpoints = len(found)
    if len(found) < num_checkpoints:
        raise ValueError(
            f"The run kept {len(found)} checkpoints, fewer than asked; train "
            "with a larger --keep_checkpoints or average fewer. "
            f"Received: model_dir={model_dir}, "
            f"num_checkpoints={num_checkpoints}"
        )
    return [path for _, path in found[-num_checkpoints:]]


def check_output(output: str, model_dir: str) -> None:
    """Fails unless `output` can take the averaged model, before any loading.

    Args:
        output: the `.keras` file to write.
        model_dir: the training directory whose checkpoints are averaged.

    Raises:
        ValueError: if `output` does not end in ".keras" (what evaluation
            and export read), is a directory, its directory does not exist or
            is not writable, or it is one of the run's checkpoints, its
            final model (`model.keras`, what translate, evaluate and export
            read from the run's directory) or its best model
            (`best_model.keras`).
    """
    problem = None
    folder = os.path.dirname(files.absolute(output))
    if not output.endswith(".keras"):
        problem = "must be a .keras file (evaluate and export read .keras)"
    elif tf.io.gfile.isdir(output):
        # The average is renamed onto it only after every checkpoint is
        # loaded and averaged.
        problem = (
            "is a directory; name the .keras file to write, e.g. "
            f"{os.path.join(output, 'averaged.keras')}"
        )
    elif not tf.io.gfile.isdir(folder):
        problem = f"must be in an existing directory ({folder} is not one)"
    elif not files.is_remote(folder) and not os.access(folder, os.W_OK):
        problem = f"must be in a writable directory ({folder} is not)"
    else:
        checkpoints = list_checkpoints(os.path.join(model_dir, CHECKPOINT_DIR))
        if any(files.same_file(output, path) for _, path in checkpoints):
            problem = (
                "must not be one of the run's checkpoints (it would replace it)"
            )
        for name, model in ((MODEL_FILE, "final"), (BEST_MODEL_FILE, "best")):
            if files.same_file(output, os.path.join(model_dir, name)):
                problem = (
                    f"must not be the run's {model} model ({name}, which it "
                    "would replace); write the average beside it, e.g. "
                    f"{os.path.join(model_dir, 'averaged.keras')}"
                )
    if problem:
        raise ValueError(f"`output` {problem}. Received: output={output}")
