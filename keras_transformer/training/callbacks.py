"""Keras callbacks of the training run: checkpoints, throughput, NaN, BLEU,
TensorBoard by step.

`fit` runs "epochs" of `steps_per_epoch` optimizer steps; every callback
here acts at the end of such an epoch, so the epoch length is the
checkpoint (and logging) interval. None saves an interval whose loss went
NaN or infinite, or whose last update left non-finite weights.
"""

import contextlib
import json
import os
import re
import time

import h5py
import keras
import numpy as np
import tensorflow as tf
from absl import logging

from keras_transformer import files
from keras_transformer.checks import check_non_negative_number, is_real
from keras_transformer.training import distribution

CHECKPOINT_PATTERN = re.compile(r"^ckpt-(\d+)\.keras$")
# The folder of a training run's checkpoints.
CHECKPOINT_DIR = "checkpoints"


def checkpoint_path(checkpoint_dir: str, step: int) -> str:
    """`<checkpoint_dir>/ckpt-<step>.keras`."""
    return os.path.join(checkpoint_dir, f"ckpt-{step}.keras")


def list_checkpoints(checkpoint_dir: str) -> list[tuple[int, str]]:
    """The `(step, path)` of every `ckpt-<step>.keras` file, oldest first."""
    if not tf.io.gfile.isdir(checkpoint_dir):
        return []
    found = []
    for name in tf.io.gfile.listdir(checkpoint_dir):
        match = CHECKPOINT_PATTERN.match(name)
        if match:
            found.append((int(match[1]), os.path.join(checkpoint_dir, name)))
    return sorted(found)


def current_step(model) -> int:
    """Training steps taken so far (`optimizer.iterations`).

    Under loss scaling this counts the skipped steps too, if the optimizer
    is `optimizer.StepCountingLossScaleOptimizer` (as the trainer's is).
    """
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


def _finite_loss(logs) -> bool:
    """Whether the `loss` of batch or epoch `logs` is finite (or absent).

    An epoch's loss is the mean of its steps', so it is finite only when
    every step's was.
    """
    loss = (logs or {}).get("loss")
    return loss is None or bool(np.isfinite(float(loss)))


def _finite_weights(model) -> bool:
    """Whether every trainable weight of `model` is finite."""
    return all(
        bool(keras.ops.all(keras.ops.isfinite(weight)))
        for weight in model.trainable_weights
    )


def finite_interval(model, logs) -> bool:
    """Whether the interval that ends with epoch `logs` may be saved.

    Its loss must be finite, and so must the weights: each step's loss is
    computed before its update, so the interval's last update can make the
    weights non-finite under a finite loss.
    """
    return _finite_loss(logs) and _finite_weights(model)


def save_model(model, path: str):
    """`model.save(path)`, written aside and renamed into place: a process
    killed while saving leaves the earlier file, or none, not a truncated
    one."""
    with files.written_aside(path) as partial:
        model.save(partial)


def _seed_states(model) -> list:
    """The model's variables that are not weights: the states of its
    dropout layers' `SeedGenerator`s, which `save_weights` leaves out."""
    weights = {id(weight) for weight in model.weights}
    return [v for v in model.variables if id(v) not in weights]


@contextlib.contextmanager
def _read_backup(path: str):
    """The backup's HDF5 file at `path`, open for reading. A remote one is
    read through `tf.io.gfile`, only the parts asked for: the step and seed
    states, not all the weights and optimizer state."""
    with contextlib.ExitStack() as stack:
        if files.is_remote(path):
            path = stack.enter_context(tf.io.gfile.GFile(path, "rb"))
        yield stack.enter_context(h5py.File(path, "r"))


class ResumableBackup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` that survives a kill at any moment.

    Keras writes the backup weights in place and the epoch to resume into a
    separate JSON file: a process killed while writing leaves a truncated
    HDF5 file (the restart then fails inside h5py), and one killed between
    the two writes resumes an epoch early and overshoots `train_steps`.
    Here the weights, which hold the optimizer's step counter, are written
    aside and renamed into place, and the epoch to resume is that counter
    divided by `steps_per_epoch`.

    The backup also holds what Keras's weights leave out for a resumed run
    to continue as an uninterrupted one would: the dropout layers' seed
    states (restored with the weights) and the step, which
    `ResumableBackup.resume_step` reads before the data pipeline is built,
    so that it skips the batches already trained on.

    Only the end of a whole epoch whose loss and weights stayed finite
    becomes the resume point (or, through `save_now`, the step where a
    signal stopped the run): after a NaN stop (mid-epoch, or at its end)
    the backup keeps the last good epoch, which a rerun then resumes from.
    Put this callback after those that write an epoch's other outputs
    (checkpoint, BLEU, logs): a process killed before the backup then
    redoes the epoch instead of skipping its outputs.

    Args:
        backup_dir: directory of the backup (kept after training, so a
            finished run reruns as a no-op).
        steps_per_epoch: optimizer steps per `fit` epoch.
        batching: what the batches of a step depend on besides the data and
            seed (`{"batch_tokens": ..., "replicas": ...}`), recorded so that
            `resume_step` can warn when a rerun batches otherwise.
        schedule: the learning-rate schedule's settings
            (`{"warmup_steps": ..., "learning_rate_scale": ...}`), recorded
            so that `resume_step` can warn when a rerun changes them (its
            learning rate then jumps at the resumed step).

    Attributes:
        saved_step: the step of the backup on disk (0 before the first),
            once training has begun.
    """

    # The HDF5 group of the backup's weights file that holds the step and
    # the seed states.
    RESUME_GROUP = "resume"
    # The settings a rerun may change (with a warning): what they are, and
    # what changes from an uninterrupted run's training.
    RECORDED = {
        "batching": ("other batching", "on other batches", "its data order"),
        "schedule": (
            "another learning-rate schedule",
            "at other learning rates",
            "its schedule",
        ),
    }

    def __init__(
        self,
        backup_dir: str,
        steps_per_epoch: int,
        batching: dict | None = None,
        schedule: dict | None = None,
    ):
        super().__init__(backup_dir, delete_checkpoint=False)
        self.steps_per_epoch = steps_per_epoch
        self.recorded = {"batching": batching or {}, "schedule": schedule or {}}
        self.saved_step = None

    @classmethod
    def resume_step(
        cls,
        backup_dir: str,
        batching: dict | None = None,
        schedule: dict | None = None,
    ) -> int:
        """The step a run with this `backup_dir` resumes at (0: none).

        Logs a warning if the backup's run batched otherwise than
        `batching`, or had another `schedule` (see the class's Args): the
        rerun then skips as many steps, but its batches are not those the
        first run would have trained on next, or its learning rate jumps.
        """
        path = os.path.join(backup_dir, "latest.weights.h5")
        if not tf.io.gfile.exists(path):
            return 0
        now = {"batching": batching or {}, "schedule": schedule or {}}
        with _read_backup(path) as backup:
            group = backup.get(cls.RESUME_GROUP)
            if group is None:
                return 0
            step = int(group.attrs["step"])
            changed = {
                kind: {
                    name: (group.attrs[f"{kind}/{name}"].item(), value)
                    for name, value in values.items()
                    if f"{kind}/{name}" in group.attrs
                    and group.attrs[f"{kind}/{name}"] != value
                }
                for kind, values in now.items()
            }
        for kind, items in changed.items():
            if items:
                what, consequence, order = cls.RECORDED[kind]
                logging.warning(
                    "Resuming at step %d with %s than the run had "
                    "(%s): training goes on from the backup, but %s than an "
                    "uninterrupted run's. Rerun with the earlier values to "
                    "continue %s exactly.",
                    step,
                    what,
                    ", ".join(
                        f"{k} {was} -> {is_}" for k, (was, is_) in items.items()
                    ),
                    consequence,
                    order,
                )
        return step

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.saved_step = current_step(self.model)

    def on_epoch_end(self, epoch, logs=None):
        step = current_step(self.model)
        if step % self.steps_per_epoch == 0 and finite_interval(
            self.model, logs
        ):
            self.save_now()

    def save_now(self):
        """Saves the backup at the current step: the resume point of a rerun
        (mid-epoch for a preempted run, see `preemption.SaveOnPreemption`)."""
        self._save_model()
        self.saved_step = current_step(self.model)

    def _save_model(self):
        tf.io.gfile.makedirs(self.backup_dir)
        # h5py writes local files: a remote backup is written locally first.
        with (
            files.written_aside(self._weights_path) as partial,
            files.local_staging(partial) as local,
        ):
            self.model.save_weights(local, overwrite=True)
            with h5py.File(local, "a") as backup:
                group = backup.create_group(self.RESUME_GROUP)
                group.attrs["step"] = current_step(self.model)
                for kind, values in self.recorded.items():
                    for name, value in values.items():
                        group.attrs[f"{kind}/{name}"] = value
                for index, state in enumerate(_seed_states(self.model)):
                    group[str(index)] = keras.ops.convert_to_numpy(state)

    def _load_model(self):
        try:
            super()._load_model()  # The weights (and step counter), if any.
        except ValueError as error:
            # Keras lists every layer that does not fit, over many lines.
            raise ValueError(
                "The backup does not fit this model: the run it belongs to "
                "has another model config. Rerun with that config to resume "
                "it, or train in a new directory. "
                f"Received: backup_dir={self.backup_dir}"
            ) from error
        if not tf.io.gfile.exists(self._weights_path):
            return
        self._restore_seed_states()
        if self.model.optimizer.built:
            self.model._initial_epoch = (
                current_step(self.model) // self.steps_per_epoch
            )

    def _restore_seed_states(self):
        states = _seed_states(self.model)
        with _read_backup(self._weights_path) as backup:
            group = backup.get(self.RESUME_GROUP)
            if group is None:
                return  # A backup of an earlier version: dropout restarts.
            if len(group) != len(states):
                raise ValueError(
                    f"The backup holds {len(group)} dropout seed states and "
                    f"the model has {len(states)}: the run it belongs to has "
                    "another model config. Rerun with that config to resume "
                    f"it, or train in a new directory. Received: "
                    f"backup_dir={self.backup_dir}"
                )
            for index, state in enumerate(states):
                state.assign(group[str(index)][()])


class KeepLastCheckpoints(keras.callbacks.Callback):
    """Saves `ckpt-<step>.keras` (weights and optimizer) at the end of each
    epoch whose loss stayed finite and deletes all but the newest `keep`.

    These files are what `averaging.average_checkpoints` averages (the
    paper averages the last 5 or 20, section 6.1). Resumption after a crash
    uses `ResumableBackup`.

    Args:
        checkpoint_dir: directory of the checkpoints.
        keep: how many of the newest checkpoints to keep (>= 1).
        every_steps: if given, save only at steps that are multiples of it:
            an epoch cut short by a signal (`preemption.SaveOnPreemption`)
            then leaves no checkpoint between the evenly spaced ones.
    """

    def __init__(
        self, checkpoint_dir: str, keep: int, every_steps: int | None = None
    ):
        super().__init__()
        if keep < 1:
            raise ValueError(
                f"`keep` must be at least 1. Received: keep={keep}"
            )
        self.checkpoint_dir = checkpoint_dir
        self.keep = keep
        self.every_steps = every_steps

    def on_epoch_end(self, epoch, logs=None):
        if not finite_interval(self.model, logs):
            return
        if self.every_steps and current_step(self.model) % self.every_steps:
            return
        tf.io.gfile.makedirs(self.checkpoint_dir)
        step = current_step(self.model)
        # Whole or absent, for averaging not to trip on a truncated file.
        save_model(self.model, checkpoint_path(self.checkpoint_dir, step))
        for _, path in list_checkpoints(self.checkpoint_dir)[: -self.keep]:
            tf.io.gfile.remove(path)


def logged_steps(summary_dir: str, tag: str) -> list[int]:
    """The steps of the TensorBoard summaries `tag` in the event files of
    `summary_dir`, file by file in the order written (a truncated file,
    from a killed process, up to its end)."""
    steps = []
    for path in sorted(
        tf.io.gfile.glob(os.path.join(summary_dir, "events.out.*"))
    ):
        try:
            for record in tf.data.TFRecordDataset(path):
                event = tf.compat.v1.Event.FromString(record.numpy())
                steps += [
                    event.step
                    for value in event.summary.value
                    if value.tag == tag
                ]
        except tf.errors.DataLossError:
            pass
    return steps


class StepTensorBoard(keras.callbacks.TensorBoard):
    """`keras.callbacks.TensorBoard` that writes each epoch's logs at the
    optimizer step it ended at, not at the epoch's number.

    A run's epochs are its checkpoint intervals, so the curves read in the
    paper's unit (steps), keep their meaning when a rerun changes the
    interval, and a run stopped mid-interval by a signal and resumed (two
    partial epochs of one number) leaves two points at their own steps,
    not two at one.
    """

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(current_step(self.model), logs)


class ThroughputLogger(keras.callbacks.Callback):
    """Adds `learning_rate` and `tokens_per_second` to the epoch logs.

    Put it before `keras.callbacks.TensorBoard` in the callback list: the
    logs dict is shared, so TensorBoard then writes both. Needs the
    `TargetTokenCount` metric among the compiled metrics.

    Args:
        tokens_metric: name of the `TargetTokenCount` metric.
    """

    def __init__(self, tokens_metric: str = "target_tokens"):
        super().__init__()
        self.tokens_metric = tokens_metric
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        seconds = time.perf_counter() - self._start
        tokens = float(logs.get(self.tokens_metric, 0.0))
        logs["tokens_per_second"] = tokens / max(seconds, 1e-9)
        # Keras evaluates the schedule at `optimizer.iterations`: the rate of
        # the next update (the paper's step_num = the step reached + 1).
        logs["learning_rate"] = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        )


class StopOnNaN(keras.callbacks.Callback):
    """Stops training at the first non-finite loss, or at the end of an
    interval whose weights are not all finite, and remembers the step.

    Unlike `keras.callbacks.TerminateOnNaN`, the run then fails with a
    message that says what to change (see `trainer.run_training`), instead
    of ending as if it had finished.
    """

    def __init__(self):
        super().__init__()
        self.nan_step = None

    def on_train_batch_end(self, batch, logs=None):
        if not _finite_loss(logs):
            self._stop()

    def on_epoch_end(self, epoch, logs=None):
        # The last update of the run's last interval has no later loss to
        # show that it broke the weights.
        if self.nan_step is None and not _finite_weights(self.model):
            self._stop()

    def _stop(self):
        self.nan_step = current_step(self.model)
        self.model.stop_training = True


class DevEvaluator(keras.callbacks.Callback):
    """Translates validation sentences every `every_steps` steps and adds
    sacreBLEU to the logs as `bleu` (and `chrf`), and, given a
    `perplexity_fn`, the references' perplexity as `perplexity` (Table 3's
    "PPL (dev)").

    Args:
        translate_fn: a function from `tf.string` [B] to a dict with
            `outputs` `tf.string` [B] (as `decoding.translator.Translator.
            translate`) over the model being trained: it must read the
            model's current weights. The sentences go through it in batches
            (`text_batches.translate_texts`).
        sources: validation source sentences.
        references: their reference translations.
        target_lang: target language (for the tokenized BLEU).
        every_steps: evaluate when the step is a multiple of this (checked
            at epoch ends; not when `fit` was stopped early), and at the
            end of training.
        final_step: the last step of the run (evaluated at the end of the
            epoch that reaches it, or else by a rerun of the finished run,
            which trains no epoch).
        interrupted: optional function that says when to skip BLEU, or
            abandon it between two batches: a signal came, and the run must
            save before its grace period ends
            (`preemption.SaveOnPreemption.signalled_anywhere`).
        summary_dir: TensorBoard directory where the scores of a model
            evaluated outside an epoch are written, as `epoch_bleu`,
            `epoch_chrf` (and `epoch_perplexity`) at its step: the epoch's
            are written by `keras.callbacks.TensorBoard` from the logs
            (`<log_dir>/train`). With it, a run resumed at a step whose
            BLEU is due but not in these summaries (a signal stopped the run
            before it) scores that step before it trains on; and the rerun
            of a finished run scores its final model (also without it).
        perplexity_fn: optional function of no argument that returns the
            `evaluation.Perplexity` of the references under the model's
            current weights (`evaluation.PerplexityScorer`); called after
            the translation, when BLEU is scored.

    Attributes:
        last_scores: the `evaluation.Scores` of the last evaluation, or
            None.
        last_perplexity: its `evaluation.Perplexity`, or None.
        last_step: the step it scored, or None.
    """

    def __init__(
        self,
        translate_fn,
        sources,
        references,
        target_lang,
        every_steps: int,
        final_step: int,
        interrupted=None,
        summary_dir: str | None = None,
        perplexity_fn=None,
    ):
        super().__init__()
        if len(sources) != len(references) or not sources:
            raise ValueError(
                "BLEU needs as many references as sources, and at least "
                f"one. Received: len(sources)={len(sources)}, "
                f"len(references)={len(references)}"
            )
        self.translate_fn = translate_fn
        self.sources = list(sources)
        self.references = list(references)
        self.target_lang = target_lang
        self.every_steps = every_steps
        self.final_step = final_step
        self.interrupted = interrupted or (lambda: False)
        self.summary_dir = summary_dir
        self.perplexity_fn = perplexity_fn
        self.last_scores = None
        self.last_perplexity = None
        self.last_step = None
        self._trained = False
        self._began = False

    def on_train_begin(self, logs=None):
        self._trained = False
        self._began = False

    def on_epoch_begin(self, epoch, logs=None):
        # After every callback's `on_train_begin`: a resumed run's weights
        # and step are restored.
        self.score_resumed_step()

    def score_resumed_step(self):
        """Scores the step that a resumed run begins at if its BLEU is due
        but missing from the summaries (a signal skipped it); once per
        `fit`, before the first batch (`EarlyStoppingOnBleu` calls it in
        its `on_train_begin`, after the weights are restored)."""
        if self._began:
            return
        self._began = True
        step = current_step(self.model)
        if (
            step
            and self.due(step)
            and self.summary_dir
            and not self.scored(step)
        ):
            self.score_outside_epoch(step)

    def due(self, step) -> bool:
        """Whether BLEU is scored at `step` (an evaluation or the last)."""
        return step % self.every_steps == 0 or step >= self.final_step

    def scored(self, step) -> bool:
        """Whether `step` was scored: by this evaluator, or in the
        summaries (by the run that trained it)."""
        return step == self.last_step or bool(
            self.summary_dir
            and step in logged_steps(self.summary_dir, "epoch_bleu")
        )

    def on_epoch_end(self, epoch, logs=None):
        self._trained = True
        step = current_step(self.model)
        if not self.due(step) or step == self.last_step:
            return
        if self.model.stop_training:
            # A stopped run (a signal, a NaN) saves first: translating can
            # outlast a preemption's grace period. A rerun of a run stopped
            # at its last step scores it (`on_train_end`).
            return
        if not finite_interval(self.model, logs):
            return
        self._evaluate(step, logs)

    def on_train_end(self, logs=None):
        # A rerun of a finished run trains no epoch: its final model is
        # still scored once, so that the rerun reports its dev BLEU too.
        step = current_step(self.model)
        if self._trained or step < self.final_step or step == self.last_step:
            return
        self.score_outside_epoch(step)

    def score_outside_epoch(self, step):
        """Scores `step`, and writes its summaries unless they are there."""
        self._evaluate(step, logs=None)
        if (
            self.summary_dir
            and self.last_step == step
            # Not again for a run that scored it (a rerun of a rerun).
            and step not in logged_steps(self.summary_dir, "epoch_bleu")
        ):
            writer = tf.summary.create_file_writer(self.summary_dir)
            with writer.as_default(step=step):
                tf.summary.scalar("epoch_bleu", self.last_scores.bleu)
                tf.summary.scalar("epoch_chrf", self.last_scores.chrf)
                if self.last_perplexity:
                    tf.summary.scalar(
                        "epoch_perplexity", self.last_perplexity.perplexity
                    )
            writer.close()

    def _evaluate(self, step, logs):
        from keras_transformer import evaluation
        from keras_transformer.decoding import text_batches

        def check_interrupted(done, total):
            # (Not once all is translated: scoring is quick.)
            if done < total and self.interrupted():
                raise _Interrupted(done, total)

        try:
            check_interrupted(0, len(self.sources))
            hypotheses = text_batches.translate_texts(
                self.translate_fn, self.sources, on_batch=check_interrupted
            )
        except _Interrupted as interruption:
            logging.warning(
                "Dev BLEU of step %d abandoned after %d of %d sentences: the "
                "run stops.",
                step,
                *interruption.args,
            )
            return
        self.last_scores = evaluation.score(
            hypotheses, self.references, self.target_lang
        )
        self.last_perplexity = (
            self.perplexity_fn() if self.perplexity_fn else None
        )
        self.last_step = step
        if logs is not None:
            logs["bleu"] = self.last_scores.bleu
            logs["chrf"] = self.last_scores.chrf
            if self.last_perplexity:
                logs["perplexity"] = self.last_perplexity.perplexity
        perplexity = (
            f", perplexity {self.last_perplexity.perplexity:.3f} "
            f"({self.last_perplexity.stats.num_examples} of "
            f"{self.last_perplexity.stats.num_pairs} pairs, "
            f"{self.last_perplexity.num_tokens} target tokens)"
            if self.last_perplexity
            else ""
        )
        print(
            f"\nstep {step}: dev BLEU {self.last_scores.bleu:.2f} "
            f"chrF {self.last_scores.chrf:.2f} "
            f"({len(self.sources)} sentences; "
            f"{self.last_scores.bleu_signature}){perplexity}",
            flush=True,
        )


class KeepBestModel(keras.callbacks.Callback):
    """Saves the model of the highest dev BLEU so far as `path`, and its
    scores beside it in `<path without .keras>.json`.

    The paper averages the last checkpoints (section 6.1); the model of the
    best dev BLEU is the other usual pick (OpenNMT-tf's `export_on_best`,
    TF Model Garden's best checkpoint exporter). Run after `evaluator` at
    each interval's end (and at the end of training, where the rerun of a
    finished run scores its final model), it compares every step that
    `evaluator` scored; a tie keeps the earlier model. A resumed run goes
    on from the record: a redone interval's step scores the same and is not
    saved again.

    The record also lists every best's step and BLEU (`improvements`), from
    which `EarlyStoppingOnBleu` finds its reference. The best model starts
    over (with a warning) when its file is gone or a kill came while it was
    written, and keeps that list; when the run scores other dev sentences,
    the list starts over too.

    Args:
        evaluator: the run's `DevEvaluator`.
        path: the `.keras` file of the best model.

    Attributes:
        best: the record of the saved model (`step`, `bleu`, `chrf`,
            `perplexity` or None, `sentences`, `bleu_signature`,
            `improvements`, and `model_saved`, false while the model is
            written), or None.
        improvements: the `[step, bleu]` of every best so far, oldest
            first (one, the record's own, from a record written before
            they were kept).
    """

    def __init__(self, evaluator: DevEvaluator, path: str):
        super().__init__()
        self.evaluator = evaluator
        self.path = path
        self.record_path = os.path.splitext(path)[0] + ".json"
        self.best = None
        self.improvements = []
        self._considered = None
        self._read = False

    def on_train_begin(self, logs=None):
        if self._read:  # A second `fit` of the run: `best` is the record.
            return
        self._read = True
        self.best = self._read_record()
        if self.best is None:
            return
        self.improvements = self.best.get("improvements") or [
            [self.best["step"], self.best["bleu"]]
        ]
        problem = None
        if self.best["sentences"] != len(self.evaluator.sources):
            problem = (
                f"it was scored on {self.best['sentences']} dev sentences, "
                f"this run scores {len(self.evaluator.sources)}"
            )
            self.improvements = []
        elif not self.best.get("model_saved", True):
            problem = f"the run stopped while it wrote {self.path}"
        elif not tf.io.gfile.exists(self.path):
            problem = f"its model, {self.path}, is missing"
        if problem:
            logging.warning(
                "The best model starts over at the next dev BLEU: %s names "
                "step %d (BLEU %.2f), but %s.",
                self.record_path,
                self.best["step"],
                self.best["bleu"],
                problem,
            )
            self.best = None

    def _read_record(self):
        """The record, None if there is none; a ValueError if damaged."""
        if not tf.io.gfile.exists(self.record_path):
            return None
        try:
            with tf.io.gfile.GFile(self.record_path) as file:
                record = json.load(file)
        except ValueError as error:  # Also not UTF-8.
            problem = f"not JSON: {error}"
        else:
            if not isinstance(record, dict):
                record = {"record": record}  # Names no step: damaged.
            improvements = record.get("improvements", [])
            problem = next(
                (
                    f"its {key!r} is {record.get(key)!r}, not a number"
                    for key in ("step", "bleu", "sentences")
                    if not is_real(record.get(key))
                ),
                None,
            )
            if not problem and not (
                isinstance(improvements, list)
                and all(
                    isinstance(pair, list)
                    and len(pair) == 2
                    and all(is_real(number) for number in pair)
                    for pair in improvements
                )
            ):
                problem = (
                    f"its 'improvements' are {improvements!r}, not a list of "
                    "[step, bleu] pairs"
                )
            if not problem and not isinstance(
                record.get("model_saved", True), bool
            ):
                problem = (
                    f"its 'model_saved' is {record['model_saved']!r}, not "
                    "true or false"
                )
        if problem:
            raise ValueError(
                f"The record of the best model is damaged ({problem}); delete "
                "it (and best_model.keras beside it) for the best model to "
                "start over, or restore it. Received: "
                f"path={self.record_path}"
            ) from None
        return record

    def on_epoch_begin(self, epoch, logs=None):
        self.consider()  # A step that a resumed run scored first.

    def on_epoch_end(self, epoch, logs=None):
        self.consider()

    def on_train_end(self, logs=None):
        self.consider()

    def consider(self):
        """Saves the model of the evaluator's last scored step if its BLEU
        is the best so far (once per step)."""
        step, scores = self.evaluator.last_step, self.evaluator.last_scores
        if step is None or step == self._considered:
            return
        self._considered = step
        if self.best is not None and scores.bleu <= self.best["bleu"]:
            return
        perplexity = self.evaluator.last_perplexity
        # (Not a later step's, that a kill while its model was written left:
        # the resumed run scores that step again.)
        earlier = [pair for pair in self.improvements if pair[0] < step]
        record = {
            "step": step,
            "bleu": scores.bleu,
            "chrf": scores.chrf,
            "perplexity": perplexity.perplexity if perplexity else None,
            "sentences": len(self.evaluator.sources),
            "bleu_signature": scores.bleu_signature,
            "improvements": earlier + [[step, scores.bleu]],
        }
        # The record says the model is being written until it is: a kill in
        # between leaves a model that may be the earlier one, which the
        # resumed run replaces (it scores the interval again), never a
        # record naming another step's model; and the improvements stay.
        files.write_whole(
            self.record_path,
            json.dumps({**record, "model_saved": False}, indent=2),
        )
        save_model(self.model, self.path)
        record["model_saved"] = True
        files.write_whole(self.record_path, json.dumps(record, indent=2))
        self.best, self.improvements = record, record["improvements"]


class EarlyStoppingOnBleu(keras.callbacks.Callback):
    """Ends training once `patience` dev BLEU evaluations in a row brought
    no BLEU more than `min_delta` above the reference (OpenNMT-tf's
    `early_stopping`, Keras's `EarlyStopping(patience=..., min_delta=...)`
    on dev BLEU); the run ends there as at its last step: its final model
    is the one of that step.

    The reference is, as in Keras's `EarlyStopping`, the BLEU of the last
    evaluation that improved on the reference before it by more than
    `min_delta` (the first evaluation's to begin with). Gains add up from
    the reference, not from the best: with `min_delta` 0.5, evaluations
    gaining 0.3 each count every second one; a run stops once `patience`
    evaluations bring no more than 0.5 over the reference. With
    `min_delta` 0 the reference is the best model's.

    Its state is the best model's `improvements` (the record's), from which
    the reference follows, and the step: at a scored step S, the run stops
    when the reference is from step S - `patience` * `every_steps` or
    earlier. So a rerun of a run stopped early trains no further step (it
    scores S again, as the rerun of a finished run does), and a rerun with
    a larger `patience` goes on, as may one with a smaller `min_delta`.
    A record written before the improvements were kept counts its own
    step as the reference. A run resumed at a step
    whose BLEU a signal skipped scores it first, before any step, and stops
    there if it brought nothing better (a signal during that scoring ends
    the run before any step, for its rerun to score it). Place it after
    the backup, whose `on_train_begin` restores a resumed run's weights.

    Under a multi-worker strategy every worker scores the same weights,
    and they stop on the first worker's decision, all at one step.

    Args:
        best_model: the run's `KeepBestModel` (with its `DevEvaluator`).
        patience: evaluations without a better BLEU that end the run.
        every_steps: the steps between two evaluations.
        strategy: the run's strategy (for the workers' agreement).
        min_delta: BLEU points an evaluation must gain over the reference
            to count as better (>= 0).

    Attributes:
        stopped_step: the step the run stopped at, or None.
        improved_step: the step of the reference, the last improvement,
            when the run stopped (None if this worker has no record: it
            stopped on the first worker's decision).
    """

    def __init__(
        self,
        best_model: KeepBestModel,
        patience: int,
        every_steps: int,
        strategy: tf.distribute.Strategy | None = None,
        min_delta: float = 0.0,
    ):
        super().__init__()
        self.best_model = best_model
        self.patience = patience
        self.every_steps = every_steps
        self.strategy = strategy or tf.distribute.get_strategy()
        self.min_delta = check_non_negative_number("min_delta", min_delta)
        self.stopped_step = None
        self.improved_step = None
        # `(model._initial_epoch,)` while a `fit` skips every epoch.
        self._kept_initial_epoch = None

    def on_train_begin(self, logs=None):
        evaluator = self.best_model.evaluator
        evaluator.score_resumed_step()
        self.best_model.consider()
        step = current_step(self.model)
        # A step whose BLEU is due decides whether the run goes on: one
        # missing from the summaries is scored above; without summaries,
        # nothing tells whether it was, and it is scored here when the
        # reference is far enough behind for the run to stop.
        needed = (
            step
            and evaluator.due(step)
            and not evaluator.scored(step)
            and (evaluator.summary_dir or self._reference_behind(step))
        )
        if needed and not evaluator.summary_dir:
            evaluator.score_outside_epoch(step)
            self.best_model.consider()
        scored = evaluator.scored(step)
        if self._stalled(step, scored):
            if evaluator.last_step != step:
                # The rerun of a run stopped early reports its dev BLEU too.
                evaluator.score_outside_epoch(step)
            self._skip_epochs()
            self._stop(step)
        elif needed and not scored:
            # A signal abandoned the resumed step's BLEU, which decides
            # whether the run goes on: no step before it is scored (the
            # signal ends the run; its rerun scores the step again).
            self._skip_epochs()
            self.model.stop_training = True

    def _skip_epochs(self):
        # Keras reads the first epoch after `on_train_begin`: none is left.
        # (Put back at the end: a later `fit` of the model starts as asked.)
        self._kept_initial_epoch = (self.model._initial_epoch,)
        self.model._initial_epoch = self.params["epochs"]

    def on_train_end(self, logs=None):
        if self._kept_initial_epoch is not None:
            (self.model._initial_epoch,) = self._kept_initial_epoch
            self._kept_initial_epoch = None

    def on_epoch_end(self, epoch, logs=None):
        step = current_step(self.model)
        # Every epoch on every worker: the agreement is a collective.
        stalled = self._stalled(
            step, step == self.best_model.evaluator.last_step
        )
        if stalled and not self.model.stop_training:
            self._stop(step)

    def reference(self, step: int) -> list | None:
        """The `[step, bleu]` of the reference at `step` (see the class),
        from the best model's improvements; None before the first
        evaluation."""
        reference = None
        for scored_step, bleu in self.best_model.improvements:
            # Keras's test: the gain must exceed `min_delta`.
            if scored_step <= step and (
                reference is None or bleu - self.min_delta > reference[1]
            ):
                reference = [scored_step, bleu]
        return reference

    def _reference_behind(self, step) -> bool:
        """Whether the reference is `patience` evaluations before `step`."""
        reference = self.reference(step)
        return (
            reference is not None
            and step - reference[0] >= self.patience * self.every_steps
        )

    def _stalled(self, step, scored) -> bool:
        stalled = (
            scored
            and self._reference_behind(step)
            # The last step ends the run anyway (and its rerun is a
            # finished run's).
            and step < self.best_model.evaluator.final_step
        )
        # The first worker's decision (the others scored the same weights).
        agreed = distribution.values_of_workers(self.strategy, [int(stalled)])
        return bool(agreed[0, 0])

    def _stop(self, step):
        self.model.stop_training = True
        self.stopped_step = step
        reference = self.reference(step)
        # (This worker's record may be missing: the first worker decided.)
        if reference is not None:
            self.improved_step = reference[0]
            logging.info(
                "Stopped early at step %d: dev BLEU has not improved on %.2f "
                "(step %d) by more than %g in %d evaluations.",
                step,
                reference[1],
                reference[0],
                self.min_delta,
                (step - reference[0]) // self.every_steps,
            )


class _Interrupted(Exception):
    """`DevEvaluator`'s translation stopped after (done, total) sentences."""
