"""Checks of a training run's settings and of its `model_dir`, made before
any data is read, and the record of settings a rerun must keep."""

import contextlib
import json
import math
import os
import socket

import tensorflow as tf
from absl import logging

from keras_transformer import files
from keras_transformer.checks import (
    check_non_negative_number,
    is_integer,
    is_real,
)

SETTINGS_FILE = "settings.json"
# Locked (`fcntl.flock`) by the process training in the directory.
LOCK_FILE = "training.lock"
# `keras.utils.set_random_seed` seeds numpy, which takes 32-bit seeds.
MAX_SEED = 2**32 - 1


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
        lower = train_steps - train_steps % steps_per_checkpoint
        higher = lower + steps_per_checkpoint
        options = f"{lower} or {higher}" if lower else f"{higher}"
        raise ValueError(
            "`train_steps` must be a multiple of `steps_per_checkpoint` "
            f"(fit runs whole checkpoint intervals): train for {options} "
            "steps, or checkpoint every k steps for a k that divides "
            "train_steps. "
            f"Received: train_steps={train_steps}, "
            f"steps_per_checkpoint={steps_per_checkpoint}"
        )


def check_run_settings(
    *,
    warmup_steps: int,
    learning_rate_scale: float,
    keep_checkpoints: int,
    bleu_every_steps: int,
    bleu_max_sentences: int,
    seed: int,
    early_stopping_patience: int = 0,
    early_stopping_min_delta: float = 0.0,
) -> None:
    """Fails unless the run's other numeric settings are in range.

    Each would otherwise fail only once the vocabulary is learned and the
    data read (`warmup_steps`, `keep_checkpoints`), deep inside numpy
    (`seed`), or not at all: a NaN `learning_rate_scale` trains to NaN, and
    a negative `bleu_max_sentences` slices the dev set from its end, and
    `bleu_every_steps` with no `bleu_max_sentences` trains without BLEU
    (as `early_stopping_patience` without `bleu_every_steps`, or
    `early_stopping_min_delta` without `early_stopping_patience`, would
    train without early stopping).

    Raises:
        ValueError: naming the first bad value.
    """
    for name, value, minimum in (
        ("warmup_steps", warmup_steps, 1),
        ("keep_checkpoints", keep_checkpoints, 1),
        ("bleu_every_steps", bleu_every_steps, 0),
        ("bleu_max_sentences", bleu_max_sentences, 0),
        ("early_stopping_patience", early_stopping_patience, 0),
    ):
        if not is_integer(value) or value < minimum:
            raise ValueError(
                f"`{name}` must be an integer >= {minimum}. "
                f"Received: {name}={value!r}"
            )
    if bleu_every_steps and not bleu_max_sentences:
        raise ValueError(
            "`bleu_every_steps` asks for dev BLEU, which "
            "bleu_max_sentences=0 turns off: pass a positive "
            "bleu_max_sentences, or bleu_every_steps=0. "
            f"Received: bleu_every_steps={bleu_every_steps}, "
            f"bleu_max_sentences={bleu_max_sentences}"
        )
    if early_stopping_patience and not bleu_every_steps:
        raise ValueError(
            "`early_stopping_patience` counts dev BLEU evaluations, of which "
            "bleu_every_steps=0 makes one, at the end: set bleu_every_steps, "
            "or early_stopping_patience=0. Received: "
            f"early_stopping_patience={early_stopping_patience}, "
            f"bleu_every_steps={bleu_every_steps}"
        )
    check_non_negative_number(
        "early_stopping_min_delta", early_stopping_min_delta
    )
    if early_stopping_min_delta and not early_stopping_patience:
        raise ValueError(
            "`early_stopping_min_delta` is the BLEU gain that early stopping "
            "counts as better, which early_stopping_patience=0 turns off: "
            "set early_stopping_patience too, or early_stopping_min_delta=0. "
            f"Received: early_stopping_min_delta={early_stopping_min_delta}, "
            f"early_stopping_patience={early_stopping_patience}"
        )
    if not (
        is_real(learning_rate_scale)
        and math.isfinite(learning_rate_scale)
        and learning_rate_scale > 0
    ):
        raise ValueError(
            "`learning_rate_scale` must be a finite positive number: it "
            "multiplies the learning rate. "
            f"Received: learning_rate_scale={learning_rate_scale!r}"
        )
    if not is_integer(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(
            f"`seed` must be an integer from 0 to 2**32 - 1 ({MAX_SEED}), as "
            f"numpy's seeds are. Received: seed={seed!r}"
        )


def check_resume_step(start_step: int, train_steps: int) -> None:
    """Fails unless a resumed run can go on to `train_steps` from its step.

    A run past `train_steps` would train no step, yet report the later one
    and save its model again.

    Raises:
        ValueError: naming the values.
    """
    if start_step > train_steps:
        raise ValueError(
            f"`train_steps` is below step {start_step}, where the run in "
            "model_dir already is (training cannot go back): pass "
            f"train_steps={start_step} to reuse the run, more to train on, "
            f"or a new model_dir. Received: train_steps={train_steps}"
        )


def worker_dir(model_dir: str, task_id: int) -> str:
    """Where worker `task_id` of a multi-worker run writes: `model_dir` for
    worker 0 (the chief), else its own folder of `model_dir/workers`, on
    its own machine (the copies are identical)."""
    if task_id == 0:
        return model_dir
    return os.path.join(model_dir, "workers", f"worker-{task_id}")


def check_workers_resume_alike(steps: "list[int]", model_dir: str) -> None:
    """Fails unless every worker of a run resumes from the same step.

    Each worker restores the backup of its own `worker_dir`: one whose
    backup is missing or behind would start from other weights and another
    place in the data, and the all-reduce would then average the gradients
    of different models (the chief would save the result).

    Args:
        steps: worker i's resume step at index i.
        model_dir: the run's `model_dir`.

    Raises:
        ValueError: naming each worker's step and the backup to copy.
    """
    if len(set(steps)) <= 1:
        return
    furthest = steps.index(max(steps))
    where = ", ".join(
        f"worker {i} from step {step}" for i, step in enumerate(steps)
    )
    raise ValueError(
        f"The workers must resume from one step, but {where}: each restores "
        "the backup folder of its own directory (worker 0: "
        f"{os.path.join(model_dir, 'backup')}; worker N: "
        f"{os.path.join(model_dir, 'workers', 'worker-N', 'backup')} on its "
        "own machine), and some are missing or behind. Copy worker "
        f"{furthest}'s backup folder to the others (the workers keep "
        "identical copies), or train in a new model_dir. Received: "
        f"model_dir={model_dir}, steps={steps}"
    )


def check_workers_share_vocabulary(
    vocabularies: "list[tuple[int, int]]", model_dir: str, vocab_file: str
) -> None:
    """Fails unless every worker of a run has the same vocabulary.

    Each worker loads (or learns, from its own copy of the corpus) the
    `vocab_file` of its own `worker_dir`: with different ones, the same
    ids would mean different pieces on different workers.

    Args:
        vocabularies: worker i's (size, CRC32 of its pieces in id order) at
            index i.
        model_dir: the run's `model_dir`.
        vocab_file: the vocabulary's file name.

    Raises:
        ValueError: naming each worker's vocabulary and the fix.
    """
    if len(set(vocabularies)) <= 1:
        return
    which = "; ".join(
        f"worker {i}: {pieces} pieces, CRC32 {crc:08x}"
        for i, (pieces, crc) in enumerate(vocabularies)
    )
    raise ValueError(
        f"The workers' vocabularies differ ({which}): each loads "
        f"{vocab_file} from its own directory, or learns it from its own "
        "copy of the corpus. Give every worker the same corpus files, and "
        f"copy worker 0's {os.path.join(model_dir, vocab_file)} to the "
        "others' "
        f"{os.path.join(model_dir, 'workers', 'worker-N', vocab_file)}. "
        f"Received: model_dir={model_dir}"
    )


def check_batch_tokens(batch_tokens: int, max_length: int, replicas: int = 1):
    """Fails unless a longest example fits in each replica's token batch.

    The condition of `batching.token_batches` (per replica), checked before
    the data is tokenized. Logs a warning when `replicas` does not divide
    `batch_tokens` (the remainder goes unused).

    Args:
        batch_tokens: the global token budget of a step.
        max_length: the model's longest sequence.
        replicas: replicas that split `batch_tokens` evenly.

    Raises:
        ValueError: naming the values.
    """
    # numpy integers too (as `batching.token_batches` takes them); a float
    # or a string would fail only once the data is read, or in a traceback.
    if not is_integer(batch_tokens):
        raise ValueError(
            "`batch_tokens` must be an integer (the token budget of a step). "
            f"Received: batch_tokens={batch_tokens!r}"
        )
    if batch_tokens // replicas < max_length:
        raise ValueError(
            "`batch_tokens` must be at least the model's max_length on each "
            "replica (the budget is split over the replicas), so that a "
            "longest example fits in a batch; raise batch_tokens or lower "
            f"max_length. Received: batch_tokens={batch_tokens}, "
            f"max_length={max_length}, replicas={replicas}"
        )
    if batch_tokens % replicas:
        # Each replica gets `batch_tokens // replicas`: say where the rest went.
        logging.warning(
            "batch_tokens=%d is not a multiple of the %d replicas: each "
            "replica's batches hold up to %d tokens, %d per step in all. "
            "Pass a multiple of %d to use the whole budget.",
            batch_tokens,
            replicas,
            batch_tokens // replicas,
            batch_tokens // replicas * replicas,
            replicas,
        )


def read_settings(folder: str) -> dict | None:
    """The settings that `save_settings` recorded in `folder`.

    Returns:
        The settings, or None if `folder` holds no settings file.

    Raises:
        ValueError: if the settings file is not a JSON object, naming it.
    """
    path = os.path.join(folder, SETTINGS_FILE)
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
        return None
    try:
        with tf.io.gfile.GFile(path, "rb") as file:
            settings = json.loads(file.read())
    except ValueError as error:  # Not JSON, or not UTF-8.
        raise ValueError(
            f"The training run's {SETTINGS_FILE} is not valid JSON "
            f"({error}); repair or delete it. Received: {path}"
        ) from None
    if not isinstance(settings, dict):
        raise ValueError(
            f"The training run's {SETTINGS_FILE} holds a JSON "
            f"{type(settings).__name__}, not an object of settings; repair "
            f"or delete it. Received: {path}"
        )
    return settings


def check_model_dir(
    model_dir: str,
    settings: dict,
    normalize: dict | None = None,
    defaults: dict | None = None,
) -> None:
    """Creates `model_dir` unless it holds a run begun with other settings.

    A rerun resumes the run in `model_dir`, whose weights, optimizer state
    and vocabulary fit only the settings that `save_settings` recorded when
    it began training.

    Args:
        model_dir: the run's output directory.
        settings: what a rerun must keep, as JSON-able names and values
            (model config fields, data, languages, precision, seed).
        normalize: functions by setting name that bring a recorded value to
            the form of `settings` (e.g. an older run's relative path to
            an absolute one), applied before comparing.
        defaults: the values of settings that a run recorded before they
            existed had (e.g. `config.LEGACY_VALUES`).

    Raises:
        ValueError: if `model_dir` is empty, a file, or cannot be created or
            read (naming the filesystem's error), if its
            settings file is not a JSON object, or if its run has other
            settings (each named with both values).
    """
    check_model_dir_named(model_dir)
    try:
        is_file = tf.io.gfile.exists(model_dir) and not tf.io.gfile.isdir(
            model_dir
        )
        if not is_file:
            tf.io.gfile.makedirs(model_dir)
        saved = None if is_file else read_settings(model_dir)
    except tf.errors.OpError as error:
        # E.g. a gs:// bucket without credentials, access or network.
        raise ValueError(
            f"`model_dir` cannot be created or read ({error.message}); "
            f"choose another directory. Received: model_dir={model_dir}"
        ) from None
    if is_file:
        raise ValueError(
            "`model_dir` is an existing file; it must be a directory (new, "
            f"or of the run to resume). Received: model_dir={model_dir}"
        )
    if saved is None:
        return
    saved = {**(defaults or {}), **saved}
    for name, function in (normalize or {}).items():
        if name in saved:
            saved[name] = function(saved[name])
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


def check_model_dir_named(model_dir: str) -> None:
    """Fails if `model_dir` is empty (an unset variable): the run would
    write into the working directory.

    Raises:
        ValueError: naming it.
    """
    if not model_dir.strip():
        raise ValueError(
            "`model_dir` is empty; name the run's directory (an empty one "
            "would be the working directory). Received: "
            f"model_dir={model_dir!r}"
        )


class ModelDirBusyError(RuntimeError):
    """Another process trains in the run's `model_dir`."""


@contextlib.contextmanager
def training_lock(model_dir: str):
    """Holds `model_dir` for one training process while the block runs.

    Two processes training in one directory (a command started twice, or a
    replacement pod started while the preempted one is still in its grace
    period) would both resume from the same backup and write the same
    checkpoints, model and logs, mixed. The lock is the kernel's
    (`fcntl.flock` of `LOCK_FILE`): released when its process ends, however
    it ends, so a crash leaves nothing to clean up. Remote directories
    (`gs://`), filesystems without locks and systems without `fcntl`
    (Windows) are not locked (a remote one's `LOCK_FILE` is written, to
    fail now if it cannot be).

    Raises:
        ModelDirBusyError: if another process holds it, naming that process.
        ValueError: if `model_dir` cannot be written.
    """
    try:
        import fcntl
    except ImportError:  # Not yielded here: the block's errors would show
        fcntl = None  # this one as their context.
    path = os.path.join(model_dir, LOCK_FILE)
    holder = f"pid {os.getpid()} on {socket.gethostname()}"
    if fcntl is None or files.is_remote(model_dir):
        # Unlocked, but written: a directory that cannot be is named now.
        try:
            with tf.io.gfile.GFile(path, "w") as file:
                file.write(holder)
        except tf.errors.OpError as error:
            raise _unwritable(model_dir, error.message) from None
        logging.info("model_dir is not locked: %s", model_dir)
        yield
        return
    try:
        lock = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (the with below)
    except OSError as error:
        raise _unwritable(model_dir, error.strerror) from None
    with lock:
        locked = True
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "a process"
            raise ModelDirBusyError(
                f"Another training process ({holder}) is running in model_dir: "
                "wait for it to end (a preempted one saves and exits within "
                "its grace period) and rerun to resume, or pass a new "
                f"model_dir. Received: model_dir={model_dir}"
            ) from None
        except OSError as error:  # No locks on this filesystem (ENOLCK).
            logging.info("model_dir is not locked: %s", error)
            locked = False
        if locked:
            lock.seek(0)
            lock.truncate()
            lock.write(holder)
            lock.flush()
        try:
            yield
        finally:
            if locked:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _unwritable(model_dir: str, reason: str) -> ValueError:
    return ValueError(
        f"Cannot write in model_dir ({reason}): training writes its "
        "checkpoints, logs and model there; pass a writable directory. "
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
    files.write_whole(path, json.dumps(settings, indent=2, sort_keys=True))
