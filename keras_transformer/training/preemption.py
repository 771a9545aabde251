"""Saving the resume point when the run is told to stop (SIGTERM, Ctrl-C).

Cloud schedulers preempt a spot VM or a pod with SIGTERM, then kill it
after a grace period (30 s on a GCE spot VM, 30 s by default on
Kubernetes). Without a handler the run loses the steps since its last
backup, up to a whole checkpoint interval. `SaveOnPreemption` turns the
signal into a stop at the end of the running step, with the backup saved
there, so that a rerun of the same command resumes from that very step (as
Keras 2's `BackupAndRestore(save_before_preemption=True)` and TensorFlow's
`PreemptionCheckpointHandler` do for their checkpoints). Ctrl-C (SIGINT)
stops the same way; a second one stops at once, without a backup.
"""

import contextlib
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
        worker: a worker that received it, when this one did not (under a
            multi-worker strategy every worker stops at the same step).
        last_step: whether `step` is the run's last: the rerun trains no
            more, it writes the final model (and dev BLEU, if evaluated).

    Attributes:
        exit_status: what a shell reports for a process the signal ended
            (128 + its number: 143 for SIGTERM), for the commands to exit
            with.
    """

    def __init__(
        self,
        step: int,
        signum: int,
        worker: int | None = None,
        last_step: bool = False,
    ):
        self.step = step
        self.signum = signum
        self.worker = worker
        self.exit_status = 128 + signum
        where = "" if worker is None else f" (sent to worker {worker})"
        rerun = (
            "finish the run, which trains no more steps"
            if last_step
            else "resume from there"
        )
        super().__init__(
            f"Training stopped on {signal.Signals(signum).name}{where} at "
            f"{'its last ' if last_step else ''}step {step}, where its backup "
            f"is saved: rerun the same command to {rerun}."
        )


class SaveOnPreemption(keras.callbacks.Callback):
    """Stops `fit` at the end of the step during which SIGTERM (or Ctrl-C's
    SIGINT) came, and saves the run's backup there.

    Signals are caught inside `with callback.catching_signals():`, a block
    around the run's `fit`s and what must not be cut short after them (the
    final model's save); the process's own handlers are back after it, also
    when it raises. Python runs signal handlers only in the main thread.

    A signal during a step stops the run at the end of that step: at an
    interval's end the interval's checkpoint and backup are written as
    usual, mid-interval only the backup is, and the resumed run first
    trains to the end of the interval (`trainer.run_training` splits its
    `fit`). A signal during the interval-end work (checkpoint, dev BLEU)
    stops the run after it, at that step. Dev BLEU, which can outlast the
    grace period, is skipped once a signal came, and abandoned if one comes
    while it translates (`signalled_anywhere` is `callbacks.DevEvaluator`'s
    `interrupted`): the backup comes first. A step whose loss or weights
    are not finite is not saved: `callbacks.StopOnNaN` then ends the run
    as for any NaN.

    Under a multi-worker strategy the workers agree at every step (and
    interval end) whether any of them was signalled (one compiled
    all-reduce of a number, `distribution.sum_over_workers`): they all stop
    at the same step and save their backups there, which a rerun of every
    worker resumes alike.

    Put this callback after the `callbacks.ResumableBackup`, so that at an
    interval's end it acts once the interval is saved.

    Args:
        backup: the run's `callbacks.ResumableBackup`.
        strategy: the run's strategy.
        signals: the signals that stop the run. A second SIGINT raises
            `KeyboardInterrupt` at once, as Python's own handler.
        last_step: the run's last step, if known (for the message of a
            stop there).

    Attributes:
        stopped: the `TrainingPreempted` of a run stopped by a signal,
            else None.
    """

    def __init__(
        self,
        backup,
        strategy,
        signals=(signal.SIGTERM, signal.SIGINT),
        last_step: int | None = None,
    ):
        super().__init__()
        self.last_step = last_step
        self.backup = backup
        self.strategy = strategy
        self.signals = tuple(signals)
        self.stopped = None
        self._received = None
        self._catching = False
        self._sum_over_workers = None

    @property
    def pending(self) -> bool:
        """Whether this process received one of the signals."""
        return self._received is not None

    @contextlib.contextmanager
    def catching_signals(self):
        """Catches the signals in its block, then restores the process's
        handlers (also when the block raises). A signal that comes between
        two `fit`s of the block stops the next one at its first step."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in self.signals:
                # One the process ignores stays ignored (e.g. SIGINT in a
                # shell's background job).
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    previous[signum] = signal.signal(signum, self._receive)
        else:
            logging.warning(
                "Training runs outside the main thread, where Python cannot "
                "catch %s: a signal stops it without saving a backup.",
                ", ".join(signal.Signals(s).name for s in self.signals),
            )
        self._catching = True
        try:
            yield self
        finally:
            self._catching = False
            for signum, handler in previous.items():
                signal.signal(
                    signum, signal.SIG_DFL if handler is None else handler
                )

    def signalled_anywhere(self) -> bool:
        """Whether this process or, under a multi-worker strategy, any
        worker received a signal.

        A collective under a multi-worker strategy: every worker must call
        it at the same points (`callbacks.DevEvaluator`, whose batches are
        the same on every worker, asks it before and after each one).
        """
        return self._agree() is not None

    def agree_on_signals(self):
        """Sets `stopped` for a signal received in the block that stopped no
        `fit` (e.g. one during the final model's save): under a multi-worker
        strategy, on every worker if any received one (a collective, as
        `signalled_anywhere`)."""
        if self.stopped is None:
            agreed = self._agree()
            if agreed is not None:
                self.stopped = self._preempted(agreed)

    def _receive(self, signum, frame):
        # Only noted here: the step, or the file, under way ends first.
        if self._received is None:
            self._received = signum
            logging.warning(
                "Received %s: training stops once the step, or file, under "
                "way is done%s.",
                signal.Signals(signum).name,
                " (Ctrl-C again stops at once, without a backup)"
                if signum == signal.SIGINT
                else "",
            )
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt  # Python's own Ctrl-C, as asked.

    def on_train_begin(self, logs=None):
        if not self._catching:
            raise RuntimeError(
                "SaveOnPreemption catches signals only inside its block: run "
                "`fit` in `with callback.catching_signals():`."
            )
        self.stopped = None

    def on_train_batch_end(self, batch, logs=None):
        if not self._stop_if_signalled():
            return
        if self.stopped.step % self.backup.steps_per_epoch == 0:
            return  # The interval's end saves it (`ResumableBackup`).
        if callbacks_lib.finite_interval(self.model, logs):
            self.backup.save_now()

    def on_epoch_end(self, epoch, logs=None):
        # A signal during the interval's end: `ResumableBackup` (before
        # this callback) has saved the interval.
        if self.stopped is None:
            self._stop_if_signalled()

    def _stop_if_signalled(self) -> bool:
        """Stops `fit` if this worker, or under a multi-worker strategy any
        worker, received a signal; returns whether it did."""
        agreed = self._agree()
        if agreed is None:
            return False
        self.model.stop_training = True
        self.stopped = self._preempted(agreed)
        return True

    def _preempted(self, agreed):
        step = callbacks_lib.current_step(self.model)
        return TrainingPreempted(
            step, *agreed, last_step=step == self.last_step
        )

    def _agree(self):
        """`(signum, worker)` of a signal received by this worker (worker
        None) or, under a multi-worker strategy, by another; else None."""
        signum = self._received or 0
        if distribution.worker_count(self.strategy) == 1:
            return (signum, None) if signum else None
        # Collectives: every worker runs them at the same points.
        if self._sum_over_workers is None:
            self._sum_over_workers = distribution.sum_over_workers(
                self.strategy
            )
        if not self._sum_over_workers(signum):
            return None
        # Once (every worker alike), to name a worker that was, if this one
        # was not.
        signals = distribution.values_of_workers(self.strategy, [signum])[:, 0]
        if signum:
            return signum, None
        worker = int(signals.nonzero()[0][0])
        return int(signals[worker]), worker
