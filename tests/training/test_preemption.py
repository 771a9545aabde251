"""SIGTERM during training: a stop after the step under way, with the backup
saved there, and a rerun that goes on as if never stopped."""

import contextlib
import io
import os
import re
import signal
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from keras_transformer import evaluation
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import preemption
from tests.data import fixtures
from tests.test_case import TestCase
from tests.training.test_callbacks import PoisonAt, compiled_model
from tests.training.test_trainer import (
    FirstStepRecorder,
    global_batch,
    run_tiny_training,
)


class SignalDuring(keras.callbacks.Callback):
    """Sends this process `signum` while the optimizer takes step `step`."""

    def __init__(self, step, signum=signal.SIGTERM):
        super().__init__()
        self.step = step
        self.signum = signum

    def on_train_batch_begin(self, batch, logs=None):
        if callbacks_lib.current_step(self.model) == self.step - 1:
            os.kill(os.getpid(), self.signum)


class SignalAfter(keras.callbacks.Callback):
    """Sends this process SIGTERM at the end of the epoch that ends at
    `step`, after the run's own callbacks."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_epoch_end(self, epoch, logs=None):
        if callbacks_lib.current_step(self.model) == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


class StepRecorder(keras.callbacks.Callback):
    """Records the step after each training batch."""

    def __init__(self):
        super().__init__()
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append(callbacks_lib.current_step(self.model))


def catch_ctrl_c(test):
    """Python's own SIGINT handler during `test`: a shell's background job
    (a test run's too) ignores Ctrl-C, which `catching_signals` then leaves
    ignored, and a SIGINT the test sends would stop nothing."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    test.addCleanup(
        signal.signal,
        signal.SIGINT,
        signal.SIG_DFL if handler is None else handler,
    )


def logged_steps(log_dir, tag="epoch_loss"):
    """The steps of the training TensorBoard summaries `tag` in `log_dir`,
    in the order written."""
    return callbacks_lib.logged_steps(os.path.join(log_dir, "train"), tag)


def backup_dir(result_or_folder):
    return os.path.join(result_or_folder, "run", "backup")


class PreemptionTest(TestCase):
    def run_until_stopped(self, message, folder, **settings):
        """`run_tiny_training` that a signal must stop with `message` (a
        regular expression); returns what it printed."""
        printed = io.StringIO()
        with (
            contextlib.redirect_stdout(printed),
            self.assertRaisesRegex(preemption.TrainingPreempted, message),
        ):
            run_tiny_training(folder, **settings)
        return printed.getvalue()

    @pytest.mark.slow
    def test_stops_mid_interval_and_resumes_as_an_uninterrupted_run(self):
        folder = fixtures.tempdir(self)
        # 6 batches an epoch, checkpoints every 2 steps.
        settings = {"train_steps": 8, "batch_tokens": 512}
        handler = signal.getsignal(signal.SIGTERM)
        with self.assertRaisesRegex(
            preemption.TrainingPreempted,
            r"^Training stopped on SIGTERM at "
            r"step 3, where its backup is saved",
        ) as stopped:
            run_tiny_training(
                folder, extra_callbacks=(SignalDuring(3),), **settings
            )
        self.assertEqual(stopped.exception.exit_status, 143)
        # The process's own handler is back.
        self.assertIs(signal.getsignal(signal.SIGTERM), handler)
        run = os.path.join(folder, "run")
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(backup_dir(folder)), 3
        )
        # No checkpoint between the evenly spaced ones, no final model.
        checkpoint_dir = os.path.join(run, "checkpoints")
        self.assertEqual(
            [
                step
                for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)
            ],
            [2],
        )
        self.assertFalse(os.path.exists(os.path.join(run, "model.keras")))

        # A signal between the resumed run's two `fit`s (the first trains to
        # the interval's end) stops the second at its first step.
        recorder = FirstStepRecorder()
        with self.assertRaisesRegex(preemption.TrainingPreempted, "at step 5,"):
            run_tiny_training(
                folder, extra_callbacks=(recorder, SignalAfter(4)), **settings
            )
        self.assertEqual(recorder.first_step, 3)
        recorder = FirstStepRecorder()
        result = run_tiny_training(
            folder, extra_callbacks=(recorder,), **settings
        )
        self.assertEqual((recorder.first_step, result.step), (5, 8))
        self.assertEqual(
            [
                step
                for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)
            ],
            [2, 4, 6, 8],
        )
        # TensorBoard has each interval, or its part, at its own step.
        self.assertEqual(
            logged_steps(os.path.join(run, "logs")), [2, 3, 4, 5, 6, 8]
        )
        # The batches of steps 4-8 and their dropout masks, over two stops,
        # are those of an uninterrupted run: the same weights, to the bit.
        straight = run_tiny_training(fixtures.tempdir(self), **settings)
        for got, want in zip(
            keras.saving.load_model(result.model_path).get_weights(),
            keras.saving.load_model(straight.model_path).get_weights(),
        ):
            self.assertAllClose(got, want, atol=0, rtol=0)

    def test_a_signal_in_a_resumed_runs_first_fit_ends_the_run(self):
        # A run resumed inside an interval trains to its end in a `fit` of
        # its own: a signal there stops the run, not that `fit` only.
        folder = fixtures.tempdir(self)
        run_tiny_training(folder, train_steps=1, steps_per_checkpoint=1)
        recorder = StepRecorder()
        self.run_until_stopped(
            "at step 2,",
            folder,
            train_steps=6,
            steps_per_checkpoint=3,
            extra_callbacks=(recorder, SignalDuring(2)),
        )
        self.assertEqual(recorder.steps, [2])
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(backup_dir(folder)), 2
        )

    def test_a_signal_after_the_last_step_leaves_the_final_model_to_the_rerun(
        self,
    ):
        # Come once training is done: the final model's save, which can
        # outlast the grace period, is not begun (the rerun writes it).
        folder = fixtures.tempdir(self)
        printed = self.run_until_stopped(
            "at its last step 4,",
            folder,
            train_steps=4,
            bleu_max_sentences=2,
            extra_callbacks=(SignalAfter(4),),
        )
        self.assertFalse(
            os.path.exists(os.path.join(folder, "run", "model.keras"))
        )
        # Dev BLEU at the end only (bleu_every_steps=0), of as many
        # sentences as asked.
        self.assertNotIn("step 2: dev BLEU", printed)
        self.assertRegex(printed, r"step 4: dev BLEU .*\(2 sentences; ")

    def test_another_workers_signal_after_the_last_step_saves_no_model(self):
        # Under a multi-worker strategy, a signal to another worker after
        # the last step's agreement: no worker writes the final model
        # before they all stop (the rerun writes it), as for this worker's.
        folder = fixtures.tempdir(self)
        agree = preemption.SaveOnPreemption._agree
        other_worker = []

        def agree_with_another(callback):
            return agree(callback) or (
                other_worker[0] if other_worker else None
            )

        signal_to_another = keras.callbacks.LambdaCallback(
            on_train_end=lambda logs: other_worker.append((signal.SIGTERM, 1))
        )
        with mock.patch.object(
            preemption.SaveOnPreemption, "_agree", agree_with_another
        ):
            self.run_until_stopped(
                re.escape("(sent to worker 1) at its last step 4,"),
                folder,
                train_steps=4,
                bleu_max_sentences=0,
                extra_callbacks=(signal_to_another,),
            )
        self.assertFalse(
            os.path.exists(os.path.join(folder, "run", "model.keras"))
        )

    @pytest.mark.slow
    def test_at_an_interval_end_saves_the_interval_but_skips_its_bleu(self):
        folder = fixtures.tempdir(self)
        settings = {
            "train_steps": 6,
            "bleu_every_steps": 2,
            "bleu_max_sentences": 2,
        }
        printed = self.run_until_stopped(
            "at step 4,", folder, extra_callbacks=(SignalDuring(4),), **settings
        )
        # Translating the dev set could outlast the grace period.
        bleu_at_2 = float(re.search(r"step 2: dev BLEU ([\d.]+)", printed)[1])
        self.assertNotIn("step 4: dev BLEU", printed)
        checkpoint_dir = os.path.join(folder, "run", "checkpoints")
        self.assertEqual(
            [
                step
                for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)
            ],
            [2, 4],
        )
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(backup_dir(folder)), 4
        )
        # The resumed run scores step 4 first (no gap in the curve, and a
        # candidate for the best model). Ctrl-C during the last step: the
        # run stops there too, without its final BLEU and model, which the
        # rerun writes without training.
        catch_ctrl_c(self)
        printed = self.run_until_stopped(
            "^Training stopped on SIGINT at its last step 6, where its backup "
            "is saved: rerun the same command "
            "to finish the run, which trains no",
            folder,
            extra_callbacks=(SignalDuring(6, signal.SIGINT),),
            **settings,
        )
        bleus = re.findall(r"step (\d+): dev BLEU ([\d.]+)", printed)
        self.assertEqual([step for step, _ in bleus], ["4"])
        model_path = os.path.join(folder, "run", "model.keras")
        self.assertFalse(os.path.exists(model_path))
        recorder = StepRecorder()
        result = run_tiny_training(
            folder, extra_callbacks=(recorder,), **settings
        )
        self.assertEqual((recorder.steps, result.step), ([], 6))
        self.assertIsNotNone(result.dev_bleu)
        self.assertTrue(os.path.exists(result.model_path))
        # Its final BLEU joins the curve (outside an epoch, whose logs
        # TensorBoard would write), once: a rerun of the rerun adds nothing.
        for tag in ("epoch_bleu", "epoch_perplexity"):
            self.assertEqual(logged_steps(result.log_dir, tag), [2, 4, 6])
        # The dev references' perplexity under the final model (the dev
        # split is the fixture pairs, of which 2 are scored).
        model = keras.saving.load_model(result.model_path)
        dev_sources, dev_references = zip(*fixtures.PAIRS[:2])
        self.assertAlmostEqual(
            result.dev_perplexity,
            evaluation.perplexity(
                model,
                SubwordTokenizer.from_file(result.vocab_path),
                dev_sources,
                dev_references,
            ).perplexity,
            places=5,
        )
        # The best of the three scored steps (the earliest on a tie) is
        # the model of its step's checkpoint.
        scored = [(2, bleu_at_2), (4, float(bleus[0][1]))]
        scored.append((6, round(result.dev_bleu, 2)))
        best = max(scored, key=lambda pair: (pair[1], -pair[0]))
        self.assertEqual(
            (result.best_step, round(result.best_dev_bleu, 2)), best
        )
        best = keras.saving.load_model(result.best_model_path)
        kept = keras.saving.load_model(
            callbacks_lib.checkpoint_path(
                result.checkpoint_dir, result.best_step
            )
        )
        for best_weight, kept_weight in zip(
            best.get_weights(), kept.get_weights(), strict=True
        ):
            self.assertAllEqual(best_weight, kept_weight)
        run_tiny_training(folder, **settings)
        for tag in ("epoch_bleu", "epoch_perplexity"):
            self.assertEqual(logged_steps(result.log_dir, tag), [2, 4, 6])

    @pytest.mark.slow
    def test_during_an_intervals_checkpoint_stops_once_it_is_saved(self):
        folder = fixtures.tempdir(self)
        settings = {
            "train_steps": 6,
            "bleu_every_steps": 2,
            "bleu_max_sentences": 2,
        }
        save = callbacks_lib.save_model

        def signal_while_saving(model, path):
            if os.path.basename(path) in ("ckpt-4.keras", "model.keras"):
                os.kill(os.getpid(), signal.SIGTERM)
            save(model, path)

        recorder = StepRecorder()
        with mock.patch.object(
            callbacks_lib, "save_model", signal_while_saving
        ):
            printed = self.run_until_stopped(
                "at step 4,", folder, extra_callbacks=(recorder,), **settings
            )
        # Not a step more, and no dev BLEU (it could outlast the grace
        # period): the interval's backup, once its checkpoint is whole.
        self.assertEqual(recorder.steps, [1, 2, 3, 4])
        self.assertNotIn("step 4: dev BLEU", printed)
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(backup_dir(folder)), 4
        )
        checkpoint_dir = os.path.join(folder, "run", "checkpoints")
        self.assertEqual(
            [
                step
                for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)
            ],
            [2, 4],
        )
        # During the final model's save: the run stops once it is whole.
        handler = signal.getsignal(signal.SIGTERM)
        with mock.patch.object(
            callbacks_lib, "save_model", signal_while_saving
        ):
            self.run_until_stopped("at its last step 6,", folder, **settings)
        self.assertIs(signal.getsignal(signal.SIGTERM), handler)
        model = keras.saving.load_model(
            os.path.join(folder, "run", "model.keras")
        )
        self.assertEqual(callbacks_lib.current_step(model), 6)


class SaveOnPreemptionTest(TestCase):
    def test_handlers_are_restored_when_the_block_raises(self):
        handler = signal.getsignal(signal.SIGTERM)
        callback = preemption.SaveOnPreemption(
            None, tf.distribute.get_strategy()
        )
        with (
            self.assertRaisesRegex(RuntimeError, "in the block"),
            callback.catching_signals(),
        ):
            os.kill(os.getpid(), signal.SIGTERM)
            raise RuntimeError("in the block")
        self.assertIs(signal.getsignal(signal.SIGTERM), handler)
        self.assertTrue(callback.pending)

    def test_a_second_ctrl_c_stops_at_once(self):
        catch_ctrl_c(self)
        callback = preemption.SaveOnPreemption(
            None, tf.distribute.get_strategy()
        )
        with self.assertRaises(KeyboardInterrupt), callback.catching_signals():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)  # Noted once only.
            self.assertEqual(callback._received, signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        stopped = preemption.TrainingPreempted(3, signal.SIGINT)
        self.assertEqual(stopped.exit_status, 130)
        self.assertTrue(
            str(stopped).startswith("Training stopped on SIGINT at step 3,")
        )

    def test_a_second_sigterm_stops_after_the_step_too(self):
        # Only Ctrl-C asked twice stops at once: a scheduler may send
        # SIGTERM again within its grace period, and the backup comes first.
        callback = preemption.SaveOnPreemption(
            None, tf.distribute.get_strategy()
        )
        try:
            with callback.catching_signals():
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            self.fail("A second SIGTERM stopped the run at once.")
        self.assertEqual(callback._received, signal.SIGTERM)
        self.assertEqual(
            preemption.TrainingPreempted(3, signal.SIGTERM).exit_status, 143
        )

    def test_an_ignored_signal_stays_ignored(self):
        # A shell's background job ignores Ctrl-C.
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            callback = preemption.SaveOnPreemption(
                None, tf.distribute.get_strategy()
            )
            with callback.catching_signals():
                self.assertIs(signal.getsignal(signal.SIGINT), signal.SIG_IGN)
                os.kill(os.getpid(), signal.SIGINT)
            self.assertFalse(callback.pending)
        finally:
            signal.signal(signal.SIGINT, handler)

    def test_fit_outside_the_block_is_refused(self):
        callback = preemption.SaveOnPreemption(
            None, tf.distribute.get_strategy()
        )
        with self.assertRaisesRegex(RuntimeError, "catching_signals"):
            callback.on_train_begin()

    def test_at_an_interval_end_the_backup_is_saved_once_after_the_rest(
        self,
    ):
        # As without a signal: a process killed while the checkpoint is
        # written then resumes before the interval, and redoes it.
        folder = fixtures.tempdir(self)
        saved = []
        checkpoints = callbacks_lib.KeepLastCheckpoints(folder, keep=5)
        backup = callbacks_lib.ResumableBackup(
            os.path.join(folder, "backup"), steps_per_epoch=2
        )
        save = preemption.SaveOnPreemption(backup, tf.distribute.get_strategy())
        self.enter_context(
            mock.patch.object(
                callbacks_lib,
                "save_model",
                side_effect=lambda *args: saved.append("checkpoint"),
            )
        )
        self.enter_context(
            mock.patch.object(
                backup,
                "_save_model",
                side_effect=lambda: saved.append("backup"),
            )
        )
        with save.catching_signals():
            compiled_model().fit(
                tf.data.Dataset.from_tensors(global_batch()).repeat(),
                epochs=2,
                steps_per_epoch=2,
                callbacks=[SignalDuring(2), checkpoints, backup, save],
                verbose=0,
            )
        self.assertEqual(save.stopped.step, 2)
        self.assertEqual(saved, ["checkpoint", "backup"])

    @parameterized.named_parameters(
        ("nan_loss", 1),  # The weights broke at step 1: step 2's loss is NaN.
        ("nan_weights", 2),  # Step 2's update broke them, under a finite loss.
    )
    def test_a_signal_after_a_non_finite_step_saves_no_backup(
        self, poison_step
    ):
        # SIGTERM during step 2, mid-interval (3 steps): its backup would be
        # the resume point of the rerun, a NaN model.
        backup_dir = os.path.join(fixtures.tempdir(self), "backup")
        backup = callbacks_lib.ResumableBackup(backup_dir, steps_per_epoch=3)
        save = preemption.SaveOnPreemption(backup, tf.distribute.get_strategy())
        nan_stop = callbacks_lib.StopOnNaN()
        model = compiled_model()
        with save.catching_signals():
            model.fit(
                tf.data.Dataset.from_tensors(global_batch()).repeat(),
                epochs=1,
                steps_per_epoch=3,
                callbacks=[
                    SignalDuring(2),
                    PoisonAt(poison_step),
                    nan_stop,
                    backup,
                    save,
                ],
                verbose=0,
            )
        # `StopOnNaN` ends the run, as for any NaN.
        self.assertEqual((save.stopped.step, nan_stop.nan_step), (2, 2))
        self.assertEqual(backup.saved_step, 0)
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(backup_dir), 0
        )

    @parameterized.named_parameters(
        # From worker 1 of 2.
        ("this_worker", [0, 15], 1, None),
        ("the_other_worker", [15, 0], 1, 0),
        ("both_workers", [15, 15], 1, None),
    )
    def test_names_the_signalled_worker_only_if_another(
        self, signals, task_id, worker
    ):
        callback = preemption.SaveOnPreemption(None, mock.Mock())
        callback.set_model(mock.Mock())
        if signals[task_id]:
            callback._receive(signal.SIGTERM, None)
        with (
            mock.patch.object(
                preemption.distribution, "worker_count", return_value=2
            ),
            mock.patch.object(
                preemption.distribution,
                "sum_over_workers",
                return_value=lambda value: sum(signals),
            ),
            mock.patch.object(
                preemption.distribution,
                "values_of_workers",
                return_value=np.array([[value] for value in signals]),
            ),
            mock.patch.object(callbacks_lib, "current_step", return_value=7),
        ):
            callback.on_epoch_end(0)
        self.assertTrue(callback.model.stop_training)
        self.assertEqual(
            (callback.stopped.step, callback.stopped.worker), (7, worker)
        )
