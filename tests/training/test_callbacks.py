"""Tests of the training callbacks on a tiny compiled model."""

import os

import numpy as np
import tensorflow as tf

from keras_transformer import build_transformer
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import trainer
from keras_transformer.training.schedule import TransformerSchedule
from tests.data import fixtures
from tests.test_case import TestCase
from tests.training.test_trainer import global_batch, tiny_config


class CallbacksTest(TestCase):
    def fit(self, callbacks, epochs=3):
        model = trainer.compile_for_training(
            build_transformer(tiny_config()), 10, jit_compile=False
        )
        dataset = tf.data.Dataset.from_tensors(global_batch()).repeat()
        return model, model.fit(
            dataset,
            epochs=epochs,
            steps_per_epoch=2,
            callbacks=callbacks,
            verbose=0,
        )

    def test_keeps_the_newest_checkpoints_and_logs_throughput(self):
        folder = fixtures.tempdir(self)
        _, history = self.fit(
            [
                callbacks_lib.KeepLastCheckpoints(folder, keep=2),
                callbacks_lib.ThroughputLogger(),
            ]
        )
        self.assertEqual(
            [step for step, _ in callbacks_lib.list_checkpoints(folder)],
            [4, 6],
        )
        labels = global_batch()[1]
        # Two steps per epoch of the same batch.
        self.assertEqual(history.history["target_tokens"][-1], 2 * np.sum(labels != 0))
        self.assertTrue(all(r > 0 for r in history.history["tokens_per_second"]))
        # The rate of the schedule at the step reached, per epoch.
        schedule = TransformerSchedule(32, warmup_steps=10)
        self.assertAllClose(
            history.history["learning_rate"],
            [float(schedule(step)) for step in (2, 4, 6)],
        )

    def test_bleu_is_evaluated_every_k_steps(self):
        calls = []

        def translate(lines):
            calls.append(len(lines))
            return list(lines)  # A perfect "translation".

        bleu = callbacks_lib.BleuEvaluator(
            translate,
            [fixtures.PAIRS[0][1]],
            [fixtures.PAIRS[0][1]],
            "de",
            every_steps=4,
            final_step=6,
        )
        _, history = self.fit([bleu])
        self.assertEqual(calls, [1, 1])  # steps 4 and 6, not 2
        self.assertAlmostEqual(bleu.last_scores.bleu, 100.0)
        self.assertAllClose(history.history["bleu"], [100.0, 100.0])

    def test_bleu_needs_matching_references(self):
        with self.assertRaisesRegex(ValueError, "len\\(references\\)=0"):
            callbacks_lib.BleuEvaluator(
                list, ["a"], [], "de", every_steps=1, final_step=1
            )

    def test_keep_must_be_positive(self):
        with self.assertRaisesRegex(ValueError, "Received: keep=0"):
            callbacks_lib.KeepLastCheckpoints(os.devnull, keep=0)
