"""Checks of a training run's settings and of its `model_dir`, made before
any data is read, and the record of settings a rerun must keep."""

import json
import os

# The smallest vocabulary `tokenizer.train_subword_vocab` accepts: 4 special
# ids, sentencepiece's 256 byte-fallback pieces and one character (a text
# needs one piece per character it covers on top).
MIN_VOCAB_SIZE = 4 + 256 + 1
SETTINGS_FILE = "settings.json"


def check_steps(train_steps: int, steps_per_checkpoint: int) -> None:
    """Fails unless the run is a whole number of checkpoint intervals.

    Raises:
        ValueError: naming both values.
    """
    if train_steps < 1 or steps_per_checkpoint < 1:
        raise ValueError(
            "`train_steps` and `steps_per_checkpoint` must be positive. "
            f"Received: train_steps={train_steps}, "
            f"steps_per_checkpoint={steps_per_checkpoint}"
        )
    if train_steps % steps_per_checkpoint:
        raise ValueError(
            "`train_steps` must be a multiple of `steps_per_checkpoint` "
            "(fit runs whole checkpoint intervals). "
            f"Received: train_steps={train_steps}, "
            f"steps_per_checkpoint={steps_per_checkpoint}"
        )


def check_batch_tokens(batch_tokens: int, max_length: int, replicas: int = 1):
    """Fails unless a longest example fits in each replica's token batch.

    The condition of `batching.token_batches` (per replica), checked before
    the data is tokenized.

    Args:
        batch_tokens: the global token budget of a step.
        max_length: the model's longest sequence.
        replicas: replicas that split `batch_tokens` evenly.

    Raises:
        ValueError: naming the values.
    """
    if batch_tokens // replicas < max_length:
        raise ValueError(
            "`batch_tokens` must be at least the model's max_length on each "
            "replica (the budget is split over the replicas), so that a "
            "longest example fits in a batch; raise batch_tokens or lower "
            f"max_length. Received: batch_tokens={batch_tokens}, "
            f"max_length={max_length}, replicas={replicas}"
        )


def check_model_dir(model_dir: str, settings: dict) -> None:
    """Creates `model_dir` unless it holds a run begun with other settings.

    A rerun resumes the run in `model_dir`, whose weights, optimizer state
    and vocabulary fit only the settings that `save_settings` recorded when
    it began training.

    Args:
        model_dir: the run's output directory.
        settings: what a rerun must keep, as JSON-able names and values
            (model config fields, data, languages, precision, seed).

    Raises:
        ValueError: if `model_dir` is a file or cannot be created, or if
            its run has other settings (each named with both values).
    """
    if os.path.isfile(model_dir):
        raise ValueError(
            "`model_dir` is an existing file; it must be a directory (new, "
            f"or of the run to resume). Received: model_dir={model_dir}"
        )
    try:
        os.makedirs(model_dir, exist_ok=True)
    except OSError as error:
        raise ValueError(
            f"`model_dir` cannot be created ({error.strerror}); choose "
            f"another directory. Received: model_dir={model_dir}"
        ) from None
    path = os.path.join(model_dir, SETTINGS_FILE)
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    differences = [
        f"{name}={saved.get(name)!r} there, {value!r} now"
        for name, value in settings.items()
        if saved.get(name) != value
    ]
    if differences:
        raise ValueError(
            "`model_dir` holds a run begun with other settings ("
            + "; ".join(differences)
            + "); its weights and vocabulary fit only those. Rerun with the "
            "same settings to resume it, or pass a new model_dir. "
            f"Received: model_dir={model_dir}"
        )


def save_settings(model_dir: str, settings: dict) -> None:
    """Records the `settings` of the run in `model_dir` (see
    `check_model_dir`) in `settings.json`.

    Args:
        model_dir: the run's output directory.
        settings: as for `check_model_dir`.
    """
    path = os.path.join(model_dir, SETTINGS_FILE)
    # Written aside and renamed, so it is never seen half-written.
    with open(path + ".partial", "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2, sort_keys=True)
    os.replace(path + ".partial", path)
