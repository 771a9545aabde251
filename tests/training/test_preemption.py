"""SIGTERM during training: a stop after the step under way, with the backup
saved there, and a rerun that goes on as if never stopped."""

import contextlib
import glob
import io
import os
import signal

import keras
import pytest
import tensorflow as tf

from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import preemption
from tests.data import fixtures
from tests.test_case import TestCase
from tests.training.test_trainer import FirstStepRecorder, run_tiny_training


class SignalDuring(keras.callbacks.Callback):
    """Sends this process SIGTERM while the optimizer takes step `step`."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_begin(self, batch, logs=None):
        if callbacks_lib.current_step(self.model) == self.step - 1:
            os.kill(os.getpid(), signal.SIGTERM)


class SignalAfter(keras.callbacks.Callback):
    """Sends this process SIGTERM at the end of the epoch that ends at
    `step`, after the run's own callbacks."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_epoch_end(self, epoch, logs=None):
        if callbacks_lib.current_step(self.model) == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def logged_steps(log_dir, tag="epoch_loss"):
    """The steps of the training TensorBoard summaries `tag` in `log_dir`,
    in the order written."""
    steps = []
    for path in sorted(glob.glob(os.path.join(log_dir, "train", "events.out.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return steps


def backup_dir(result_or_folder):
    return os.path.join(result_or_folder, "run", "backup")


class PreemptionTest(TestCase):
    @pytest.mark.slow
    def test_stops_mid_interval_and_resumes_as_an_uninterrupted_run(self):
        folder = fixtures.tempdir(self)
        # 6 batches an epoch, checkpoints every 2 steps.
        settings = {"train_steps": 8, "batch_tokens": 512}
        handler = signal.getsignal(signal.SIGTERM)
        with self.assertRaisesRegex(
            preemption.TrainingPreempted,
            r"^Training stopped on SIGTERM at step 3, where its backup is saved",
        ) as stopped:
            run_tiny_training(folder, extra_callbacks=(SignalDuring(3),), **settings)
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
            [step for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)], [2]
        )
        self.assertFalse(os.path.exists(os.path.join(run, "model.keras")))

        # A signal between the resumed run's two `fit`s (while step 4's
        # checkpoint is written; the first trains to the interval's end)
        # stops the second at its first step.
        recorder = FirstStepRecorder()
        with self.assertRaisesRegex(preemption.TrainingPreempted, "at step 5,"):
            run_tiny_training(
                folder, extra_callbacks=(recorder, SignalAfter(4)), **settings
            )
        self.assertEqual(recorder.first_step, 3)
        recorder = FirstStepRecorder()
        result = run_tiny_training(folder, extra_callbacks=(recorder,), **settings)
        self.assertEqual((recorder.first_step, result.step), (5, 8))
        self.assertEqual(
            [step for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)],
            [2, 4, 6, 8],
        )
        # TensorBoard has each interval, or its part, at its own step.
        self.assertEqual(logged_steps(os.path.join(run, "logs")), [2, 3, 4, 5, 6, 8])
        # The batches of steps 4-8 and their dropout masks, over two stops, are those of an
        # uninterrupted run: the same weights, to the bit.
        straight = run_tiny_training(fixtures.tempdir(self), **settings)
        for got, want in zip(
            keras.saving.load_model(result.model_path).get_weights(),
            keras.saving.load_model(straight.model_path).get_weights(),
        ):
            self.assertAllClose(got, want, atol=0, rtol=0)

    @pytest.mark.slow
    def test_at_an_interval_end_saves_the_interval_but_skips_its_bleu(self):
        folder = fixtures.tempdir(self)
        settings = {"train_steps": 6, "bleu_every_steps": 2, "bleu_max_sentences": 2}
        printed = io.StringIO()
        with (
            contextlib.redirect_stdout(printed),
            self.assertRaisesRegex(preemption.TrainingPreempted, "at step 4,"),
        ):
            run_tiny_training(folder, extra_callbacks=(SignalDuring(4),), **settings)
        # Translating the dev set could outlast the grace period.
        self.assertIn("step 2: dev BLEU", printed.getvalue())
        self.assertNotIn("step 4: dev BLEU", printed.getvalue())
        checkpoint_dir = os.path.join(folder, "run", "checkpoints")
        self.assertEqual(
            [step for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)],
            [2, 4],
        )
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(backup_dir(folder)), 4
        )
        # A signal during the last step: the run has finished, and ends as
        # such (with its model and final dev BLEU).
        result = run_tiny_training(
            folder, extra_callbacks=(SignalDuring(6),), **settings
        )
        self.assertEqual(result.step, 6)
        self.assertIsNotNone(result.dev_bleu)
        self.assertTrue(os.path.exists(result.model_path))
