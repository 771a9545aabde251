"""Saving the resume point when the run is told to stop (SIGTERM).

Cloud schedulers preempt a spot VM or a pod with SIGTERM, then kill it
after a grace period (30 s on a GCE spot VM, 30 s by default on
Kubernetes). Without a handler the run loses the steps since its last
backup, up to a whole checkpoint interval. `SaveOnPreemption` turns the
signal into a stop at the end of the running step, with the backup saved
there, so that a rerun of the same command resumes from that very step (as
Keras 2's `BackupAndRestore(save_before_preemption=True)` and TensorFlow's
`PreemptionCheckpointHandler` do for their checkpoints).
"""

import signal
import threading

import keras
from absl import logging

from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import distribution


class TrainingPreempted(Exception):
    """The run stopped on a signal, with its backup saved at `step`.

    Args:
        step: the step the run stopped at; a rerun resumes from it.
        signum: the signal's number.
        worker: the worker that received it, when another one did (under a
            multi-worker strategy every worker stops at the same step).

    Attributes:
        exit_status: what a shell reports for a process the signal ended
            (128 + its number: 143 for SIGTERM), for the commands to exit
            with.
    """

    def __init__(self, step: int, signum: int, worker: int | None = None):
        self.step = step
        self.signum = signum
        self.worker = worker
        self.exit_status = 128 + signum
        where = "" if worker is None else f" (sent to worker {worker})"
        super().__init__(
            f"Training stopped on {signal.Signals(signum).name}{where} at step "
            f"{step}, where its backup is saved: rerun the same command to "
            "resume from there."
        )


class SaveOnPreemption(keras.callbacks.Callback):
    """Stops `fit` at the end of the step during which SIGTERM came, and
    saves the run's backup there.

    The signal is caught only during `fit` (the process's own handler is
    back afterwards) and only in the main thread, where Python runs signal
    handlers. At an interval's end the interval's own outputs are written
    as usual (checkpoint and backup; dev BLEU, which can outlast the grace
    period, is skipped there by `callbacks.BleuEvaluator`); mid-interval
    only the backup is, and the resumed run first trains to the end of the
    interval (`trainer.run_training` splits its `fit`). A step whose loss
    or weights are not finite is not saved: `callbacks.StopOnNaN` then
    ends the run as for any NaN.

    Under a multi-worker strategy the workers agree at every step whether
    any of them was signalled (one compiled all-reduce of a number per
    step, `distribution.sum_over_workers`): they all stop at the same step
    and save their backups there, which a rerun of every worker resumes
    alike.

    Args:
        backup: the run's `callbacks.ResumableBackup`.
        strategy: the run's strategy.
        signals: the signals that stop the run.

    Attributes:
        stopped: the `TrainingPreempted` of a run stopped by a signal,
            else None.
    """

    def __init__(self, backup, strategy, signals=(signal.SIGTERM,)):
        super().__init__()
        self.backup = backup
        self.strategy = strategy
        self.signals = tuple(signals)
        self.stopped = None
        self._received = None
        self._previous = {}
        self._sum_over_workers = None

    def on_train_begin(self, logs=None):
        # A signal received between two `fit`s of one run (see
        # `trainer.run_training`) is kept: the next one stops at its first
        # step.
        self.stopped = None
        if threading.current_thread() is not threading.main_thread():
            logging.warning(
                "Training runs outside the main thread, where Python cannot "
                "catch %s: a signal stops it without saving a backup.",
                ", ".join(signal.Signals(s).name for s in self.signals),
            )
            return
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._receive)

    def on_train_end(self, logs=None):
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        self._previous = {}

    def _receive(self, signum, frame):
        # Only noted here: the step under way ends first.
        if self._received is None:
            self._received = signum
            logging.warning(
                "Received %s: stopping after this step and saving a backup.",
                signal.Signals(signum).name,
            )

    def on_train_batch_end(self, batch, logs=None):
        signum = self._received or 0
        worker = None
        if distribution.worker_count(self.strategy) > 1:
            # Collectives: every worker runs them at the same steps.
            if self._sum_over_workers is None:
                self._sum_over_workers = distribution.sum_over_workers(self.strategy)
            if not self._sum_over_workers(signum):
                return
            # Once, to name the worker.
            signals = distribution.values_of_workers(self.strategy, [signum])[:, 0]
            worker = int(signals.nonzero()[0][0])
            signum = int(signals[worker])
            if worker == self.strategy.cluster_resolver.task_id:
                worker = None
        elif not signum:
            return
        self.model.stop_training = True
        step = callbacks_lib.current_step(self.model)
        self.stopped = TrainingPreempted(step, signum, worker)
        if step % self.backup.steps_per_epoch == 0:
            return  # The interval's end saves it (`ResumableBackup`).
        if callbacks_lib.finite_interval(self.model, logs):
            self.backup.save_now()
