"""Tests of the fit-based training run: distribution, resumption, NaN."""

import dataclasses
import json
import os
import re
import socket
import time
import urllib.error
import uuid
import warnings
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized
from sacrebleu.tokenizers import tokenizer_ja_mecab

from keras_transformer import (
    TransformerConfig,
    build_transformer,
    evaluation,
    export_model,
    inference,
    tokens,
)
from keras_transformer import config as config_lib
from keras_transformer.data import tfds_source
from keras_transformer.training import (
    averaging,
    distribution,
    run_checks,
    trainer,
)
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training.schedule import TransformerSchedule
from tests.data import fixtures
from tests.gpu_kernels import cpu_only_ops
from tests.test_case import TestCase, eight_replica_strategy

VOCAB = 50


def tiny_config(**overrides):
    return TransformerConfig.preset(
        "tiny",
        **{
            "vocab_size": VOCAB,
            "num_layers": 1,
            "d_model": 32,
            "d_ff": 64,
            "num_heads": 4,
            "max_length": 32,
            **overrides,
        },
    )


def write_corpus(folder):
    """`train.en/de` and `dev.en/de` of the fixture pairs; the data spec."""
    for split in ("train", "dev"):
        for index, lang in enumerate(("en", "de")):
            lines = "".join(pair[index] + "\n" for pair in fixtures.PAIRS)
            fixtures.write(os.path.join(folder, f"{split}.{lang}"), lines)
    return "text:" + os.path.join(folder, "train")


def global_batch(batch_size=16, length=9):
    """A fixed batch whose sentences have different amounts of padding."""
    rng = np.random.default_rng(0)
    ids = rng.integers(4, VOCAB, size=(3, batch_size, length)).astype("int32")
    lengths = rng.integers(2, length + 1, size=(2, batch_size))
    positions = np.arange(length)
    source = np.where(positions < lengths[0][:, None], ids[0], 0)
    target = np.where(positions < lengths[1][:, None], ids[1], 0)
    labels = np.where(positions < lengths[1][:, None], ids[2], 0)
    return {"source_ids": source, "target_ids": target}, labels


def assert_same_update(test, got, want, initial, atol, rtol):
    """Asserts that models `got` and `want`, both started from the weights
    `initial`, have equal weights, and that most of them moved."""
    moved = 0
    for got_weight, want_weight, start in zip(
        got.get_weights(), want.get_weights(), initial
    ):
        test.assertAllClose(got_weight, want_weight, atol=atol, rtol=rtol)
        moved += int(np.any(np.abs(want_weight - start) > 1e-6))
    test.assertGreater(moved, len(initial) // 2)


class CrashAt(keras.callbacks.Callback):
    """Simulates a killed process once the optimizer reaches `step`."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if callbacks_lib.current_step(self.model) == self.step:
            raise KeyboardInterrupt(f"killed at step {self.step}")


class FirstStepRecorder(keras.callbacks.Callback):
    """The step a run begins at (its first `fit`'s: a run resumed inside a
    checkpoint interval fits twice)."""

    first_step = None

    def on_train_begin(self, logs=None):
        if self.first_step is None:
            self.first_step = callbacks_lib.current_step(self.model)


def bleu_by_step(by_step, step):
    """Patches sacreBLEU: the dev BLEU is `by_step[step()]` (its other
    scores are the translation's)."""
    score = evaluation.score

    def scored(*args):
        return dataclasses.replace(score(*args), bleu=float(by_step[step()]))

    return mock.patch.object(evaluation, "score", scored)


def finite_weights(path):
    model = keras.saving.load_model(path)
    return all(np.isfinite(w).all() for w in model.get_weights())


def run_tiny_training(folder, config=None, **overrides):
    """`trainer.run_training` of the tiny model on the fixture corpus."""
    arguments = {
        "data": write_corpus(folder),
        "src_lang": "en",
        "tgt_lang": "de",
        "model_dir": os.path.join(folder, "run"),
        "warmup_steps": 4,
        "batch_tokens": 64,
        "vocab_size": fixtures.VOCAB_SIZE,
        "steps_per_checkpoint": 2,
        "bleu_max_sentences": 0,
        "jit_compile": False,
        "verbose": 0,
        **overrides,
    }
    return trainer.run_training(config or tiny_config(), **arguments)


class TrainerTest(TestCase):
    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_eight_replicas_take_the_single_device_step_and_log_its_loss(
        self,
    ):
        config = tiny_config(dropout=0.0, attention_dropout=0.0)
        # 13 sentences over 8 replicas: 1 or 2 each, with their own padding.
        # Keras weighted each replica's share of the logged loss by its
        # sentences: the logged loss was off.
        features, labels = global_batch(batch_size=13)
        dataset = tf.data.Dataset.from_tensors((features, labels))

        keras.utils.set_random_seed(1)
        single = trainer.compile_for_training(
            build_transformer(config),
            warmup_steps=10,
            jit_compile=False,
            optimizer=keras.optimizers.SGD(1.0),
        )
        initial = single.get_weights()
        single_loss = single.fit(dataset, epochs=1, verbose=0).history["loss"]

        strategy = eight_replica_strategy()
        self.assertEqual(strategy.num_replicas_in_sync, 8)
        with strategy.scope():
            mirrored = trainer.compile_for_training(
                build_transformer(config),
                warmup_steps=10,
                # Without XLA: its per-replica clusters compile once per
                # device, 8 times (~2 minutes of the suite). The XLA step's
                # numerics are `test_replica_xla`'s, its all-reduce is the
                # accumulating step's (`test_accumulation`, 8 replicas), and
                # the two-worker test of `test_train_processes` runs it.
                jit_compile=False,
                # SGD: the update is the gradient itself (Adam's first step
                # is sign(gradient), which amplifies rounding noise).
                optimizer=keras.optimizers.SGD(1.0),
            )
            xla = trainer.compile_for_training(
                build_transformer(config), warmup_steps=10, jit_compile=True
            )
        # Keras's default would turn XLA off under the strategy: each
        # replica's pass is compiled instead (`replica_xla.py`).
        self.assertTrue(xla.replica_jit_compile)
        self.assertFalse(mirrored.replica_jit_compile)
        mirrored.set_weights(initial)
        mirrored_loss = mirrored.fit(dataset, epochs=1, verbose=0).history[
            "loss"
        ]

        assert_same_update(
            self, mirrored, single, initial, atol=2e-5, rtol=1e-4
        )
        self.assertAllClose(mirrored_loss, single_loss, rtol=1e-5)
        self.assertEqual([m.name for m in mirrored.metrics].count("loss"), 1)

    def test_adam_moments_exist_before_the_first_step(self):
        # Built by compile_for_training (in the strategy's scope: mirrored),
        # not by Keras inside the first step; the step then updates these
        # very variables.
        with eight_replica_strategy().scope():
            mirrored = trainer.compile_for_training(
                build_transformer(tiny_config()),
                warmup_steps=10,
                jit_compile=False,
            )
        self.assertTrue(mirrored.optimizer.built)
        self.assertIsInstance(
            mirrored.optimizer._momentums[0].value,
            tf.distribute.DistributedValues,
        )

        model = trainer.compile_for_training(
            build_transformer(tiny_config()), warmup_steps=10, jit_compile=False
        )
        optimizer = model.optimizer
        moments = optimizer._momentums + optimizer._velocities
        self.assertEqual(
            [m.shape for m in moments],
            2 * [w.shape for w in model.trainable_weights],
        )
        self.assertFalse(any(np.any(m.numpy()) for m in moments))
        before = [id(v) for v in optimizer.variables]
        model.train_on_batch(*global_batch())
        self.assertEqual([id(v) for v in optimizer.variables], before)
        self.assertEqual(callbacks_lib.current_step(model), 1)
        self.assertTrue(all(np.any(m.numpy()) for m in optimizer._velocities))

    def run_training(self, folder, config=None, **overrides):
        return run_tiny_training(folder, config, **overrides)

    @pytest.mark.slow
    def test_resumes_after_a_crash_where_it_stopped(self):
        folder = fixtures.tempdir(self)
        with self.assertRaisesRegex(KeyboardInterrupt, "killed at step 7"):
            self.run_training(
                folder,
                train_steps=8,
                keep_checkpoints=2,
                batch_tokens=512,
                extra_callbacks=(CrashAt(7),),
            )
        recorder = FirstStepRecorder()
        result = self.run_training(
            folder,
            train_steps=8,
            keep_checkpoints=2,
            batch_tokens=512,
            extra_callbacks=(recorder,),
        )
        # Resumed from the checkpoint of step 6: one step of work lost.
        self.assertEqual(recorder.first_step, 6)
        self.assertEqual(result.step, 8)
        model = keras.saving.load_model(result.model_path)
        self.assertEqual(int(model.optimizer.iterations.numpy()), 8)
        self.assertAllClose(
            model.optimizer.learning_rate,
            TransformerSchedule(32, warmup_steps=4)(8),
        )
        checkpoints = callbacks_lib.list_checkpoints(result.checkpoint_dir)
        self.assertEqual([step for step, _ in checkpoints], [6, 8])
        self.assertTrue(tf.io.gfile.listdir(result.log_dir))
        # The resumed run went on with the uninterrupted run's batches (it
        # skipped the 6 it had trained on, an epoch, into the reshuffled next
        # one) and dropout masks, so it ends with the same weights.
        straight = self.run_training(
            fixtures.tempdir(self),
            train_steps=8,
            keep_checkpoints=2,
            batch_tokens=512,
        )
        self.assertEqual(straight.data_stats.num_batches, 6)
        for got, want in zip(
            model.get_weights(),
            keras.saving.load_model(straight.model_path).get_weights(),
        ):
            self.assertAllClose(got, want, atol=0, rtol=0)
        # Rerunning a finished run trains no further, and still scores the
        # final model on the dev sentences (it reported no dev BLEU).
        again = self.run_training(
            folder,
            train_steps=8,
            keep_checkpoints=2,
            batch_tokens=512,
            bleu_max_sentences=4,
        )
        self.assertEqual(again.step, 8)
        self.assertIsNotNone(again.dev_bleu)
        # Scored at the end only: the best model would be the final one.
        self.assertIsNone(again.best_model_path)
        self.assertFalse(
            os.path.exists(os.path.join(folder, "run", "best_model.keras"))
        )
        # Nor can a rerun change what the saved weights and vocabulary fit.
        with self.assertRaisesRegex(ValueError, "num_layers=1 there, 2 now"):
            self.run_training(folder, tiny_config(num_layers=2), train_steps=8)
        with self.assertRaisesRegex(ValueError, "seed=0 there, 1 now"):
            self.run_training(folder, train_steps=8, seed=1)
        with self.assertRaisesRegex(
            ValueError, f"rerun with vocab_size={fixtures.VOCAB_SIZE} "
        ):
            self.run_training(
                folder, train_steps=8, vocab_size=fixtures.VOCAB_SIZE + 8
            )

    @pytest.mark.slow
    def test_early_stopping_ends_the_run_and_its_reruns_at_one_step(self):
        folder = fixtures.tempdir(self)
        holder = keras.callbacks.Callback()  # Keras gives it the model.
        # Dev BLEU every 4 steps (checkpoints every 2): step 8's is the
        # last more than 0.5 above the one before it, step 16's the best.
        by_step = {4: 10.0, 8: 20.0, 12: 5.0, 16: 20.25, 20: 5.0}

        def run(min_delta):
            batches = []
            recorder = keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda batch, logs: batches.append(batch)
            )
            with bleu_by_step(
                by_step, lambda: callbacks_lib.current_step(holder.model)
            ):
                result = self.run_training(
                    folder,
                    train_steps=20,
                    bleu_every_steps=4,
                    bleu_max_sentences=2,
                    early_stopping_patience=2,
                    early_stopping_min_delta=min_delta,
                    extra_callbacks=(holder, recorder),
                )
            return result, len(batches)

        result, trained = run(min_delta=0.5)
        self.assertEqual(trained, 16)
        self.assertTrue(result.stopped_early)
        self.assertEqual((result.step, result.dev_bleu), (16, 20.25))
        self.assertEqual((result.best_step, result.best_dev_bleu), (16, 20.25))
        self.assertEqual(result.improved_step, 8)
        model = keras.saving.load_model(result.model_path)
        self.assertEqual(callbacks_lib.current_step(model), 16)
        # Its rerun resumes from the backup at step 16, trains no step (no
        # throughput) and reports the same.
        again, trained = run(min_delta=0.5)
        self.assertEqual(trained, 0)
        self.assertEqual(
            again, dataclasses.replace(result, tokens_per_second=None)
        )
        # Without the minimum gain, step 16's counts: the run trains on, to
        # the last step.
        result, trained = run(min_delta=0.0)
        self.assertEqual(trained, 4)
        self.assertFalse(result.stopped_early)
        self.assertEqual((result.step, result.best_step), (20, 16))
        self.assertIsNone(result.improved_step)

    def test_a_remote_model_dir_trains_resumes_and_translates(self):
        # TensorFlow's in-memory filesystem stands for gs://: every file of
        # the run goes through tf.io.gfile (h5py's backup through a local
        # copy); a local os call would write under "./ram:" instead.
        folder = fixtures.tempdir(self)
        model_dir = f"ram://{uuid.uuid4().hex}/run"
        settings = {
            "model_dir": model_dir,
            "train_steps": 4,
            "batch_tokens": 512,
        }
        with self.assertRaisesRegex(KeyboardInterrupt, "killed at step 3"):
            self.run_training(folder, extra_callbacks=(CrashAt(3),), **settings)
        recorder = FirstStepRecorder()
        with self.assertLogs("absl", "INFO") as logs:
            result = self.run_training(
                folder, extra_callbacks=(recorder,), **settings
            )
        self.assertEqual((recorder.first_step, result.step), (2, 4))
        self.assertIn(
            f"Resuming at step 2 of 4 from the backup in {model_dir}/backup.",
            [record.getMessage() for record in logs.records],
        )
        self.assertFalse(os.path.exists("ram:"))
        self.assertContainsSubset(
            ["backup", "checkpoints", "logs", "model.keras", "settings.json"],
            tf.io.gfile.listdir(model_dir),
        )
        # Not locked, but the lock file names the process that trained.
        with tf.io.gfile.GFile(f"{model_dir}/{run_checks.LOCK_FILE}") as file:
            self.assertRegex(file.read(), f"^pid {os.getpid()} on ")
        # The commands read the run where it is.
        averaging.check_output(f"{model_dir}/averaged.keras", model_dir)
        with self.assertRaisesRegex(
            ValueError, "must be in an existing directory"
        ):
            averaging.check_output(
                f"{model_dir}/missing/averaged.keras", model_dir
            )
        keras_file = f"{model_dir}/model.keras"
        self.assertEqual(inference.run_folder(keras_file), model_dir)
        vocab = export_model.default_vocab(model_dir, [keras_file])
        self.assertEqual(vocab, f"{model_dir}/vocab.model")
        local = os.path.join(folder, "copy")
        for path in (keras_file, vocab, f"{model_dir}/settings.json"):
            tf.io.gfile.makedirs(local)
            tf.io.gfile.copy(path, os.path.join(local, os.path.basename(path)))
        sentences = [source for source, _ in fixtures.PAIRS[:3]]
        self.assertEqual(
            inference.load_translator(model_dir, beam_size=2).translate(
                sentences
            ),
            inference.load_translator(local, beam_size=2).translate(sentences),
        )

    @pytest.mark.slow
    def test_accumulating_run_counts_updates_and_resumes_on_its_batches(self):
        # 2 batches a step: the 6 batches of an epoch make 3 steps, and a
        # run resumed at step 2 skips 4 batches, not 2.
        settings = {"train_steps": 4, "batch_tokens": 512}
        settings["gradient_accumulation_steps"] = 2
        folder = fixtures.tempdir(self)
        with self.assertRaisesRegex(KeyboardInterrupt, "killed at step 3"):
            self.run_training(folder, extra_callbacks=(CrashAt(3),), **settings)
        recorder = FirstStepRecorder()
        result = self.run_training(
            folder, extra_callbacks=(recorder,), **settings
        )
        self.assertEqual(recorder.first_step, 2)
        self.assertEqual(result.step, 4)
        model = keras.saving.load_model(result.model_path)
        self.assertAllClose(
            model.optimizer.learning_rate,
            TransformerSchedule(32, warmup_steps=4)(4),
        )
        straight = self.run_training(fixtures.tempdir(self), **settings)
        for got, want in zip(
            model.get_weights(),
            keras.saving.load_model(straight.model_path).get_weights(),
        ):
            self.assertAllClose(got, want, atol=0, rtol=0)

    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_trains_on_eight_replicas_with_per_replica_token_batches(self):
        result = self.run_training(
            fixtures.tempdir(self),
            train_steps=2,
            batch_tokens=2048,
            # Each replica's 2 batches a step, grouped by its pipeline.
            gradient_accumulation_steps=2,
            bleu_max_sentences=4,
            strategy=eight_replica_strategy(),
            # Per-replica XLA is checked above; compiling it for each
            # replica's token-batch shape would take minutes here.
            jit_compile=False,
        )
        self.assertEqual(result.step, 2)
        self.assertIsNotNone(result.dev_bleu)

    @pytest.mark.slow
    def test_nan_loss_stops_with_a_clear_error_and_saves_nothing(self):
        folder = fixtures.tempdir(self)
        settings = {
            "train_steps": 4,
            "warmup_steps": 1,
            "steps_per_checkpoint": 4,
        }
        with self.assertRaisesRegex(
            FloatingPointError,
            "NaN or infinite at step .*learning_rate_scale.* starts over",
        ):
            self.run_training(folder, learning_rate_scale=1e30, **settings)
        # The NaN step's weights were saved nowhere: rerun as advised, the
        # run starts over and trains.
        result = self.run_training(folder, learning_rate_scale=1.0, **settings)
        self.assertEqual(result.step, 4)
        self.assertTrue(finite_weights(result.model_path))
        checkpoints = callbacks_lib.list_checkpoints(result.checkpoint_dir)
        self.assertEqual([step for step, _ in checkpoints], [4])
        self.assertTrue(finite_weights(checkpoints[0][1]))

    def test_an_update_to_non_finite_weights_is_not_saved(self):
        folder = fixtures.tempdir(self)
        # The one step's loss is finite; its update (a learning rate beyond
        # float32) makes the weights infinite.
        with self.assertRaisesRegex(
            FloatingPointError,
            "loss or weights became NaN or infinite at step 1",
        ):
            self.run_training(
                folder,
                train_steps=1,
                steps_per_checkpoint=1,
                warmup_steps=1,
                learning_rate_scale=1e40,
            )
        run = os.path.join(folder, "run")
        self.assertFalse(os.path.exists(os.path.join(run, "checkpoints")))
        self.assertEqual(
            callbacks_lib.ResumableBackup.resume_step(
                os.path.join(run, "backup")
            ),
            0,
        )
        self.assertFalse(os.path.exists(os.path.join(run, "model.keras")))

    @pytest.mark.slow
    def test_a_kill_before_the_backup_redoes_the_interval(self):
        folder = fixtures.tempdir(self)
        evaluate = callbacks_lib.DevEvaluator.on_epoch_end
        bleu_steps = []

        def killed_at_4(evaluator, epoch, logs=None):
            if callbacks_lib.current_step(evaluator.model) == 4:
                raise KeyboardInterrupt("killed during BLEU at step 4")
            evaluate(evaluator, epoch, logs)

        def recorded(evaluator, epoch, logs=None):
            evaluate(evaluator, epoch, logs)
            if "bleu" in logs:
                bleu_steps.append(callbacks_lib.current_step(evaluator.model))

        settings = {
            "train_steps": 6,
            "bleu_every_steps": 4,
            "bleu_max_sentences": 1,
            "keep_checkpoints": 5,
        }
        with (
            mock.patch.object(
                callbacks_lib.DevEvaluator, "on_epoch_end", killed_at_4
            ),
            self.assertRaisesRegex(KeyboardInterrupt, "step 4"),
        ):
            self.run_training(folder, **settings)
        with mock.patch.object(
            callbacks_lib.DevEvaluator, "on_epoch_end", recorded
        ):
            result = self.run_training(folder, **settings)
        # The backup, written last, still held step 2: the rerun redid steps
        # 3-4, so step 4 has its checkpoint and its BLEU.
        self.assertEqual(bleu_steps, [4, 6])
        checkpoints = callbacks_lib.list_checkpoints(result.checkpoint_dir)
        self.assertEqual([step for step, _ in checkpoints], [2, 4, 6])

    def test_a_rerun_that_changes_the_steps_batches_or_rates_warns(self):
        # Resumable, as only the order of the data or the learning rates
        # change, but not as an uninterrupted run: said before it goes on.
        folder = fixtures.tempdir(self)
        self.run_training(folder, train_steps=2)
        with (
            self.assertLogs("absl", "WARNING") as logs,
            # (Refused right after: it stops there.)
            self.assertRaisesRegex(ValueError, "below step 2"),
        ):
            self.run_training(
                folder,
                train_steps=1,
                steps_per_checkpoint=1,
                gradient_accumulation_steps=2,
                learning_rate_scale=0.5,
            )
        batching, schedule = logs.output
        self.assertIn(
            "other batching than the run had "
            "(gradient_accumulation_steps 1 -> 2)",
            batching,
        )
        self.assertIn(
            "another learning-rate schedule than the run had "
            "(learning_rate_scale 1.0 -> 0.5)",
            schedule,
        )

    def test_settings_are_checked_before_the_data_is_read(self):
        folder = fixtures.tempdir(self)
        a_file = os.path.join(folder, "a_file")
        fixtures.write(a_file, "")
        for overrides, message in (
            (
                {"vocab_size": tokens.MIN_VOCAB_SIZE - 1},
                f">= {tokens.MIN_VOCAB_SIZE} "
                f".*vocab_size={tokens.MIN_VOCAB_SIZE - 1}",
            ),
            (
                {"config": tiny_config(source_vocab_size=VOCAB)},
                "shared vocabulary.*source_vocab_size=50",
            ),
            (
                {"batch_tokens": 31},
                "batch_tokens=31, max_length=32, replicas=1",
            ),
            # Ignored without a word before.
            (
                {"data_dir": "/data/tfds"},
                "a text corpus does not read.*data_dir=/data/tfds, data=text:",
            ),
            ({"model_dir": a_file}, "is an existing file.*model_dir="),
            ({"model_dir": " "}, "`model_dir` is empty.*model_dir=' '"),
            # These failed only after the vocabulary (or numpy's seeding),
            # or never: a NaN scale trained to NaN, a negative sentence
            # count sliced the dev set from its end.
            ({"keep_checkpoints": 0}, "keep_checkpoints=0"),
            ({"warmup_steps": 0}, "warmup_steps=0"),
            ({"learning_rate_scale": float("nan")}, "learning_rate_scale=nan"),
            ({"learning_rate_scale": True}, "learning_rate_scale=True"),
            ({"seed": -1}, "from 0 to 2\\*\\*32 - 1.*seed=-1"),
            ({"bleu_max_sentences": -1}, "bleu_max_sentences=-1"),
            ({"mixed_precision": "fp16"}, "mixed_precision='fp16'"),
            (
                {"early_stopping_min_delta": float("nan")},
                "early_stopping_min_delta=nan",
            ),
            # BLEU is computed at checkpoint ends only.
            (
                {"bleu_every_steps": 3},
                "multiple of `steps_per_checkpoint`.*"
                "Received: bleu_every_steps=3, steps_per_checkpoint=2$",
            ),
            # Split over the replicas: 31 tokens each.
            (
                {"strategy": eight_replica_strategy(), "batch_tokens": 248},
                "batch_tokens=248, max_length=32, replicas=8$",
            ),
            ({"num_gpus": 2}, "strategy='default', num_gpus=2"),
            # Trained without BLEU, silently.
            (
                {"bleu_every_steps": 2, "bleu_max_sentences": 0},
                "bleu_max_sentences=0 turns off.*"
                "Received: bleu_every_steps=2, bleu_max_sentences=0",
            ),
            # Trained without early stopping, silently.
            (
                {"early_stopping_min_delta": 0.5},
                "early_stopping_min_delta=0.5, early_stopping_patience=0$",
            ),
            # TensorFlow's own error names no flag to pass.
            (
                {"strategy": "tpu"},
                re.escape(
                    "needs the TPU to connect to: pass tpu_address (--tpu)"
                )
                + ".*Received: strategy='tpu', tpu_address=None",
            ),
            (
                {"tpu_address": "local"},
                "strategy='default', tpu_address='local'",
            ),
        ):
            with (
                self.subTest(overrides=overrides),
                self.assertRaisesRegex(ValueError, message),
            ):
                trainer.run_training(
                    **{
                        "config": tiny_config(),
                        "data": "text:" + os.path.join(folder, "missing"),
                        "src_lang": "en",
                        "tgt_lang": "de",
                        "model_dir": os.path.join(folder, "run"),
                        "train_steps": 2,
                        "steps_per_checkpoint": 2,
                        "batch_tokens": 64,
                        "vocab_size": fixtures.VOCAB_SIZE,
                        **overrides,
                    }
                )
            self.assertFalse(os.path.exists(os.path.join(folder, "run")))

    def test_a_rerun_keeps_the_precision_and_languages_of_its_run(self):
        # Float16's loss scaling adds optimizer variables: its backup does
        # not load into a float32 run, nor a float32 one into float16.
        model_dir = os.path.join(fixtures.tempdir(self), "run")
        os.makedirs(model_dir)
        run_checks.save_settings(
            model_dir,
            {
                "mixed_precision": "mixed_float16",
                "src_lang": "de",
                "tgt_lang": "en",
            },
        )
        message = self.settings_error(model_dir, "text:/corpus/train")
        for difference in (
            "mixed_precision='mixed_float16' there, 'float32' now",
            "src_lang='de' there, 'en' now",
            "tgt_lang='en' there, 'de' now",
        ):
            self.assertIn(difference, message)

    def test_dev_perplexity_warns_of_the_pairs_it_leaves_out(self):
        model = build_transformer(
            tiny_config(vocab_size=fixtures.VOCAB_SIZE, max_length=40)
        )
        tokenizer = fixtures.tokenizer()
        long_source = " ".join(source for source, _ in fixtures.PAIRS[:4])
        with self.assertLogs("absl", "WARNING") as logs:
            scorer = trainer._dev_perplexity_scorer(
                model,
                tokenizer,
                [fixtures.PAIRS[0][0], long_source],
                [fixtures.PAIRS[0][1], "Ja."],
            )
        self.assertEqual(scorer.stats.num_examples, 1)
        (message,) = logs.output
        self.assertIn(
            "Dev perplexity leaves pairs out: 2 pairs read, 1 kept", message
        )
        # None fits: the run trains on without it, and says so.
        with self.assertLogs("absl", "WARNING") as logs:
            self.assertIsNone(
                trainer._dev_perplexity_scorer(
                    model, tokenizer, [long_source], ["Ja."]
                )
            )
        (message,) = logs.output
        self.assertIn("No dev perplexity: No pair can be scored", message)

    def test_dev_bleu_checks_its_target_language_before_the_data_is_read(
        self,
    ):
        # A tokenizer that sacreBLEU lacks would fail at the first BLEU, a
        # checkpoint interval into the run.
        folder = fixtures.tempdir(self)
        run = {
            "data": "text:" + os.path.join(folder, "missing"),
            "src_lang": "en",
            "tgt_lang": "ja",
            "model_dir": os.path.join(folder, "run"),
            "train_steps": 2,
            "steps_per_checkpoint": 2,
        }
        with mock.patch.object(tokenizer_ja_mecab, "MeCab", None):
            with self.assertRaisesRegex(
                ValueError, re.escape("pip install 'sacrebleu[ja]'")
            ):
                trainer.run_training(tiny_config(), bleu_max_sentences=4, **run)
            self.assertFalse(os.path.exists(run["model_dir"]))
            # Without BLEU, the missing corpus is the problem.
            with self.assertRaisesRegex(FileNotFoundError, "missing.en"):
                trainer.run_training(tiny_config(), bleu_max_sentences=0, **run)

    def test_a_run_that_went_nan_is_told_where_its_rerun_resumes(self):
        for precision, saved_step, restart in (
            (
                "mixed_float16",
                4,
                "it resumes from step 4, the end of the last interval with a "
                "finite loss (or train in float32, in a new --model_dir). ",
            ),
            (
                "float32",
                0,
                "it starts over, as no interval ended with a finite loss. ",
            ),
        ):
            error = trainer._non_finite_error(6, saved_step, precision, 0.5)
            self.assertIsInstance(error, FloatingPointError)
            self.assertIn(
                "at step 6, so that interval was not saved", str(error)
            )
            self.assertIn(restart, str(error))
            self.assertTrue(
                str(error).endswith(
                    f"Received: mixed_precision={precision}, "
                    "learning_rate_scale=0.5"
                )
            )

    def test_a_model_dir_that_another_process_trains_in_is_refused(self):
        folder = fixtures.tempdir(self)
        model_dir = os.path.join(folder, "run")
        os.makedirs(model_dir)
        with run_checks.training_lock(model_dir):
            # A lock is an open file description's: a second one conflicts
            # in this process too.
            with self.assertRaisesRegex(
                run_checks.ModelDirBusyError,
                rf"Another training process \(pid {os.getpid()} on .*\) is "
                rf"running in model_dir: .*Received: model_dir={model_dir}$",
            ):
                trainer.run_training(
                    config=tiny_config(),
                    data=write_corpus(folder),
                    src_lang="en",
                    tgt_lang="de",
                    model_dir=model_dir,
                    train_steps=2,
                    steps_per_checkpoint=2,
                    batch_tokens=64,
                    vocab_size=fixtures.VOCAB_SIZE,
                )
            self.assertEqual(os.listdir(model_dir), [run_checks.LOCK_FILE])
        # Released at the block's end, and when the holder raised.
        with self.assertRaises(KeyError), run_checks.training_lock(model_dir):
            raise KeyError
        with run_checks.training_lock(model_dir):
            pass
        denied = PermissionError(13, "Permission denied")
        with (
            mock.patch("builtins.open", side_effect=denied),
            self.assertRaisesRegex(
                ValueError, r"Cannot write in model_dir \(Perm"
            ),
            run_checks.training_lock(model_dir),
        ):
            pass

    def test_a_missing_dev_split_fails_before_the_vocabulary_is_learned(self):
        folder = fixtures.tempdir(self)
        data = write_corpus(folder)
        for lang in ("en", "de"):
            os.remove(os.path.join(folder, f"dev.{lang}"))
        with self.assertRaisesRegex(
            FileNotFoundError,
            "No dev split beside.*Or train without dev BLEU: "
            r"bleu_max_sentences=0 \(--bleu_max_sentences=0\)\. Received: "
            "location=",
        ):
            trainer.run_training(
                tiny_config(),
                data=data,
                src_lang="en",
                tgt_lang="de",
                model_dir=os.path.join(folder, "run"),
                train_steps=2,
                steps_per_checkpoint=2,
                batch_tokens=64,
                vocab_size=fixtures.VOCAB_SIZE,
                bleu_max_sentences=4,
            )
        run = os.path.join(folder, "run")
        self.assertFalse(os.path.exists(os.path.join(run, "vocab.model")))
        self.assertFalse(
            os.path.exists(os.path.join(run, run_checks.SETTINGS_FILE))
        )

    def test_missing_training_files_are_reported_before_a_missing_dev_split(
        self,
    ):
        # A wrong prefix or language lacks the dev files too; the fix to
        # name is the training files', not "train without dev BLEU".
        folder = fixtures.tempdir(self)
        corpus_dir = os.path.join(folder, "corpus")
        os.makedirs(corpus_dir)
        corpus = write_corpus(corpus_dir)
        for lang in ("en", "de"):
            os.remove(os.path.join(corpus_dir, f"dev.{lang}"))
        for data, tgt_lang, missing in (
            (f"text:{corpus_dir}/missing", "de", f"{corpus_dir}/missing.en"),
            (corpus, "fr", f"{corpus_dir}/train.fr"),
        ):
            with self.assertRaisesRegex(
                FileNotFoundError,
                f"^Text corpus file {re.escape(missing)} does not exist.*"
                f"Received: path={re.escape(missing)}$",
            ):
                run_tiny_training(
                    folder,
                    data=data,
                    tgt_lang=tgt_lang,
                    train_steps=2,
                    bleu_max_sentences=4,
                )

    def test_a_rerun_with_another_checkpoint_interval_keeps_to_its_multiples(
        self,
    ):
        folder = fixtures.tempdir(self)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = self.run_training(
                folder, train_steps=1, steps_per_checkpoint=1
            )
        # Nor does a run warn of what it does on purpose (Keras's default
        # `fit(shuffle=True)` on a dataset that the pipeline shuffles).
        self.assertEqual(
            [str(w.message) for w in caught if "shuffle" in str(w.message)], []
        )
        # Resumed at step 1 with intervals of 3: step 3 ends the first
        # (a `fit` of the two steps left of it), then 6, not 2 and 5.
        recorder = FirstStepRecorder()
        rates = []
        result = self.run_training(
            folder,
            train_steps=6,
            steps_per_checkpoint=3,
            extra_callbacks=(
                recorder,
                keras.callbacks.LambdaCallback(
                    on_epoch_end=lambda epoch, logs: rates.append(
                        logs["tokens_per_second"]
                    )
                ),
            ),
        )
        self.assertEqual((recorder.first_step, result.step), (1, 6))
        # The throughput reported is the last interval's.
        self.assertLen(rates, 2)
        self.assertEqual(result.tokens_per_second, rates[-1])
        checkpoints = callbacks_lib.list_checkpoints(first.checkpoint_dir)
        self.assertEqual([step for step, _ in checkpoints], [1, 3, 6])

    def test_batch_tokens_left_over_by_the_replicas_are_reported(self):
        with self.assertLogs(level="WARNING") as logs:
            run_checks.check_batch_tokens(70, 8, replicas=8)
        self.assertRegex(logs.output[0], "batch_tokens=70 .* 64 per step")
        with self.assertNoLogs(level="WARNING"):
            run_checks.check_batch_tokens(64, 8, replicas=8)

    def test_each_replica_must_hold_a_longest_example(self):
        # The budget is split over the replicas: 31 tokens each here.
        with self.assertRaisesRegex(
            ValueError, "batch_tokens=248, max_length=32, replicas=8$"
        ):
            run_checks.check_batch_tokens(248, 32, replicas=8)
        run_checks.check_batch_tokens(256, 32, replicas=8)

    def test_run_settings_are_checked_at_their_bounds(self):
        settings = {
            "warmup_steps": 1,
            "learning_rate_scale": 1.0,
            "keep_checkpoints": 1,
            "bleu_every_steps": 0,
            "bleu_max_sentences": 0,
            "seed": 0,
        }
        # numpy's largest seed, and the smallest values, pass.
        run_checks.check_run_settings(
            **{**settings, "seed": run_checks.MAX_SEED}
        )
        for name, value in (
            ("seed", run_checks.MAX_SEED + 1),
            # A rate of 0 trains nothing; the schedule would refuse it only
            # once the data is read.
            ("learning_rate_scale", 0.0),
            ("learning_rate_scale", -1.0),
            ("learning_rate_scale", float("inf")),
            ("bleu_every_steps", -2),
            ("early_stopping_patience", -1),
            ("early_stopping_patience", 2.0),
            ("early_stopping_min_delta", -0.5),
            ("early_stopping_min_delta", float("nan")),
            ("early_stopping_min_delta", "0.5"),
        ):
            with (
                self.subTest(name=name, value=value),
                self.assertRaisesRegex(
                    ValueError, re.escape(f"Received: {name}={value!r}") + "$"
                ),
            ):
                run_checks.check_run_settings(
                    **{**settings, "bleu_max_sentences": 4, name: value}
                )
        # Early stopping counts the evaluations of bleu_every_steps.
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "set bleu_every_steps, or early_stopping_patience=0. "
                "Received: early_stopping_patience=2, bleu_every_steps=0"
            ),
        ):
            run_checks.check_run_settings(
                **{**settings, "early_stopping_patience": 2}
            )
        # And the minimum gain is early stopping's.
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "set early_stopping_patience too, or "
                "early_stopping_min_delta=0. Received: "
                "early_stopping_min_delta=0.5, early_stopping_patience=0"
            ),
        ):
            run_checks.check_run_settings(
                **{**settings, "early_stopping_min_delta": 0.5}
            )
        run_checks.check_run_settings(
            **{
                **settings,
                "early_stopping_patience": 2,
                "early_stopping_min_delta": 0.5,
                "bleu_every_steps": 2,
                "bleu_max_sentences": 4,
            }
        )

    def test_the_lock_file_names_only_the_process_that_holds_it(self):
        # Not also the longer name an earlier holder left in it.
        model_dir = fixtures.tempdir(self)
        path = fixtures.write(
            os.path.join(model_dir, run_checks.LOCK_FILE),
            "pid 4194304 on an-earlier-host-with-a-long-name",
        )
        with run_checks.training_lock(model_dir), open(path) as file:
            self.assertEqual(
                file.read(), f"pid {os.getpid()} on {socket.gethostname()}"
            )

    def test_batch_tokens_is_checked_as_an_integer_numpy_included(self):
        run_checks.check_batch_tokens(np.int64(4096), 256)
        # A float failed only once the data was read, a string in a
        # traceback.
        for value in (4096.0, "4096", True):
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "`batch_tokens` must be an integer (the token budget of a "
                    f"step). Received: batch_tokens={value!r}"
                ),
            ):
                run_checks.check_batch_tokens(value, 256)

    def test_min_vocab_size_passes_the_tokenizers_own_minimum(self):
        folder = fixtures.tempdir(self)
        # The rest is the text's: one piece per character it covers.
        with self.assertRaisesRegex(ValueError, "needs at least"):
            self.run_training(
                folder, train_steps=2, vocab_size=tokens.MIN_VOCAB_SIZE
            )
        # The run failed before training: a rerun may change any setting.
        settings = os.path.join(folder, "run", run_checks.SETTINGS_FILE)
        self.assertFalse(os.path.exists(settings))

    def test_model_dir_keeps_the_settings_of_its_run(self):
        model_dir = os.path.join(fixtures.tempdir(self), "run")
        settings = {"num_layers": 1, "dropout": 0.1, "data": "text:a"}
        run_checks.check_model_dir(model_dir, settings)  # Creates it.
        run_checks.save_settings(model_dir, settings)
        with open(os.path.join(model_dir, run_checks.SETTINGS_FILE)) as f:
            self.assertEqual(json.load(f), settings)
        run_checks.check_model_dir(model_dir, settings)  # The same: resumable.
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "(num_layers=1 there, 2 now; data='text:a' there, 'text:b' now)"
            )
            + ".*new model_dir. Received: model_dir=",
        ):
            run_checks.check_model_dir(
                model_dir, {**settings, "num_layers": 2, "data": "text:b"}
            )
        # A setting the run predates had its old value (`defaults`): the
        # attention biases of a run begun before `attention_bias` existed.
        legacy = {**settings, **config_lib.LEGACY_VALUES}
        run_checks.check_model_dir(
            model_dir, legacy, defaults=config_lib.LEGACY_VALUES
        )
        with self.assertRaisesRegex(
            ValueError, re.escape("(attention_bias=True there, False now)")
        ):
            run_checks.check_model_dir(
                model_dir,
                {**settings, "attention_bias": False},
                defaults=config_lib.LEGACY_VALUES,
            )

    def settings_error(self, model_dir, data, data_dir=None):
        """The message of a run in `model_dir`, whose settings file holds
        only some settings (so the others differ too)."""
        with self.assertRaisesRegex(ValueError, "begun with other") as caught:
            trainer.run_training(
                tiny_config(),
                data=data,
                data_dir=data_dir,
                src_lang="en",
                tgt_lang="de",
                model_dir=model_dir,
                train_steps=2,
                steps_per_checkpoint=2,
            )
        return str(caught.exception)

    def test_a_rerun_compares_the_corpus_not_its_spelling(self):
        folder = fixtures.tempdir(self)
        model_dir = os.path.join(folder, "run")
        os.makedirs(model_dir)
        # As an older run recorded it: relative to the folder it ran in.
        run_checks.save_settings(model_dir, {"data": "text:c/train"})
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(folder)
        # The same files.
        self.assertNotIn(
            "data=", self.settings_error(model_dir, "text:c/../c/train")
        )
        self.assertNotIn(
            "data=", self.settings_error(model_dir, f"text:{folder}/c/train")
        )
        # Not the same files, from another working directory.
        os.chdir(model_dir)
        self.assertIn(
            f"data='text:{model_dir}/c/train' there, "
            f"'text:{folder}/c/train' now",
            self.settings_error(model_dir, f"text:{folder}/c/train"),
        )

    def test_a_rerun_reads_a_tfds_corpus_from_the_same_data_dir(self):
        folder = fixtures.tempdir(self)
        model_dir = os.path.join(folder, "run")
        os.makedirs(model_dir)
        data = "tfds:wmt14_translate/de-en"
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(folder)

        def settings_error(recorded, data_dir):
            run_checks.save_settings(model_dir, {"data": data, **recorded})
            return self.settings_error(model_dir, data, data_dir)

        # Another prepared copy, or TFDS's default for a forgotten flag.
        self.assertIn(
            f"data_dir='/data/tfds' there, '{folder}/tfds' now",
            settings_error({"data_dir": "/data/tfds"}, "tfds"),
        )
        default = tfds_source.data_root()
        self.assertIn(
            f"data_dir='/data/tfds' there, '{default}' now",
            settings_error({"data_dir": "/data/tfds"}, None),
        )
        self.assertNotIn(
            "data_dir=", settings_error({"data_dir": default}, None)
        )
        self.assertNotIn(
            "data_dir=",
            settings_error({"data_dir": "/data/tfds"}, "/data/tfds/"),
        )
        # A run that recorded no data_dir (begun before it was recorded).
        self.assertNotIn("data_dir=", settings_error({}, "tfds"))

    def test_settings_file_that_is_not_json_is_named(self):
        model_dir = fixtures.tempdir(self)
        self.assertIsNone(run_checks.read_settings(model_dir))
        # A folder of that name is no settings file either.
        os.makedirs(os.path.join(model_dir, "other", run_checks.SETTINGS_FILE))
        self.assertIsNone(
            run_checks.read_settings(os.path.join(model_dir, "other"))
        )
        path = fixtures.write(
            os.path.join(model_dir, run_checks.SETTINGS_FILE), "{"
        )
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "The training run's settings.json is not valid JSON (Expecting "
                "property name enclosed in double quotes: line 1 column 2 "
                f"(char 1)); repair or delete it. Received: {path}"
            ),
        ):
            run_checks.check_model_dir(model_dir, {})
        fixtures.write(path, "[]")
        with self.assertRaisesRegex(
            ValueError, f"holds a JSON list, not an object.*Received: {path}"
        ):
            run_checks.check_model_dir(model_dir, {})

    def test_float16_steps_skipped_by_loss_scaling_count(self):
        distribution.set_precision("mixed_float16")
        model = trainer.compile_for_training(
            build_transformer(tiny_config()), warmup_steps=10, jit_compile=False
        )
        before = model.get_weights()
        # A scale that overflows float16 gradients: the step is skipped.
        model.optimizer.dynamic_scale.assign(2.0**40)
        model.train_on_batch(*global_batch())
        self.assertEqual(float(model.optimizer.dynamic_scale.numpy()), 2.0**39)
        for got, want in zip(model.get_weights(), before):
            self.assertAllEqual(got, want)
        # Counted all the same: checkpoints, resumption and BLEU use the
        # step of `fit`.
        self.assertEqual(callbacks_lib.current_step(model), 1)

    def test_strategies_by_name(self):
        self.assertEqual(
            distribution.create_strategy("mirrored", 2).num_replicas_in_sync, 2
        )
        self.assertIsInstance(
            distribution.create_strategy("one_device"),
            tf.distribute.OneDeviceStrategy,
        )
        with self.assertRaisesRegex(ValueError, "strategy='horovod'"):
            distribution.create_strategy("horovod")
        with self.assertRaisesRegex(
            ValueError,
            r"the 8 logical CPU devices \(TensorFlow sees no GPU\).*num_gpus=9",
        ):
            distribution.create_strategy("mirrored", 9)
        # No TPU here: one line, not TensorFlow's traceback from its TPU set-up.
        with self.assertRaisesRegex(
            ValueError,
            "^No TPU could be set up at tpu_address \\(--tpu\\): TPUs not "
            "found in the cluster.*Received: tpu_address='local'$",
        ):
            distribution.create_strategy("tpu", tpu_address="local")
        # Other strategies would ignore it.
        with self.assertRaisesRegex(
            ValueError, "strategy='one_device', num_gpus=1"
        ):
            distribution.create_strategy("one_device", 1)
        with mock.patch.dict(os.environ):
            os.environ.pop("TF_CONFIG", None)
            with self.assertRaisesRegex(
                ValueError, "TF_CONFIG.*: it is not set"
            ):
                distribution.create_strategy("multi_worker")
        with self.assertRaisesRegex(ValueError, "tpu_address=''"):
            distribution.create_strategy("tpu", tpu_address="")
        with self.assertRaisesRegex(
            ValueError, "strategy='mirrored', tpu_address"
        ):
            distribution.create_strategy(
                "mirrored", tpu_address="grpc://1.2.3.4:8470"
            )

    def test_unknown_precisions_are_named(self):
        # Keras's own error names no choice.
        with self.assertRaisesRegex(
            ValueError,
            "^Unknown precision; choose one of float32, mixed_bfloat16, "
            "mixed_float16. Received: mixed_precision='float16'$",
        ):
            distribution.set_precision("float16")

    def test_mirrored_takes_every_device_unless_told(self):
        # No GPU here: the 8 logical CPU devices stand for them.
        self.assertEqual(
            distribution.create_strategy("mirrored").num_replicas_in_sync, 8
        )
        with self.assertLogs("absl", "WARNING") as logs:
            distribution.create_strategy("mirrored", 2)
        self.assertIn(
            "--num_gpus=2: TensorFlow sees no GPU, so strategy='mirrored' "
            "replicates over the CPU's logical devices.",
            logs.output[0],
        )
        # Not all but the last one (devices[:-1]).
        with self.assertRaisesRegex(
            ValueError,
            r"between 0 \(all\) and the 8 logical CPU devices .*num_gpus=-1$",
        ):
            distribution.create_strategy("mirrored", -1)

    def test_a_tpu_that_cannot_be_reached_fails_in_one_line(self):
        # A grpc address nothing listens at: TensorFlow waited forever,
        # deaf to Ctrl-C.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            address = f"grpc://127.0.0.1:{probe.getsockname()[1]}"
        start = time.monotonic()
        with self.assertRaisesRegex(
            TimeoutError,
            "^Nothing accepted a connection at tpu_address \\(--tpu\\) "
            f"{address} "
            r"within 1 s \(.*refused\).*raise --worker_startup_timeout\.",
        ):
            distribution.create_strategy(
                "tpu", tpu_address=address, worker_startup_timeout=1
            )
        # Within the timeout (a retry a second away would be past it).
        self.assertLess(time.monotonic() - start, 3)
        # A TPU name off Google Cloud: urllib's error from the metadata
        # server was a traceback.
        unknown = urllib.error.URLError(
            socket.gaierror(-2, "Name or service not known")
        )
        with (
            mock.patch.object(
                tf.distribute.cluster_resolver,
                "TPUClusterResolver",
                side_effect=unknown,
            ),
            self.assertRaisesRegex(
                ValueError,
                "^No TPU could be set up at tpu_address \\(--tpu\\): "
                r"<urlopen error .*only on a Google Cloud VM.*"
                r"Received: tpu_address='my-tpu'$",
            ),
        ):
            distribution.create_strategy("tpu", tpu_address="my-tpu")

    @parameterized.parameters(
        ("{bad json", "it is not valid JSON"),
        ('{"cluster": {"worker": ["a:1", "b:2"]}}', 'it has no "task"'),
        ('{"task": {"type": "worker", "index": 0}}', 'it has no "cluster"'),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, '
            '"task": {"type": "worker", "index": 2}}',
            "its task index is 2, not an integer "
            "from 0 to 1 .the cluster has 2",
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, '
            '"task": {"type": "worker", "index": true}}',
            "its task index is True",
        ),
        # A chief would wait for a peer that never comes: worker 0 is it.
        (
            '{"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, '
            '"task": {"type": "worker", "index": 0}}',
            "its cluster has 'chief' tasks; only \"worker\" ones are supported",
        ),
        (
            '{"cluster": {"worker": ["a:1"]}, '
            '"task": {"type": "chief", "index": 0}}',
            "its task type is 'chief', not \"worker\"",
        ),
    )
    def test_a_bad_tf_config_is_named(self, tf_config, problem):
        # Each used to get the same message, as if TF_CONFIG were unset;
        # the chief and boolean forms hung, waiting for peers.
        with (
            mock.patch.dict(os.environ, {"TF_CONFIG": tf_config}),
            self.assertRaisesRegex(
                ValueError,
                f"^--strategy=multi_worker needs TF_CONFIG .*: {problem}.*"
                "Received: TF_CONFIG=",
            ),
        ):
            distribution.create_strategy("multi_worker")

    def test_workers_that_disagree_are_named(self):
        # (The two-worker processes test runs the gather across workers.)
        one = distribution.values_of_workers(
            tf.distribute.get_strategy(), [7, 3]
        )
        self.assertAllEqual(one, [[7, 3]])
        self.assertEqual(
            distribution.worker_count(tf.distribute.get_strategy()), 1
        )
        run_checks.check_workers_resume_alike([4, 4, 4], "/run")
        with self.assertRaisesRegex(
            ValueError,
            "^The workers must resume from one step, but worker 0 from step 4, "
            "worker 1 from step 0, worker 2 from step 6: .*/run/backup.*"
            "/run/workers/worker-N/backup .*Copy worker 2's backup folder "
            "to the others",
        ):
            run_checks.check_workers_resume_alike([4, 0, 6], "/run")
        run_checks.check_workers_share_vocabulary(
            [(9, 1), (9, 1)], "/run", "v.model"
        )
        with self.assertRaisesRegex(
            ValueError,
            "^The workers' vocabularies differ .worker 0: 9 pieces, CRC32 "
            "0000000a; worker 1: 9 pieces, CRC32 0000000b.: .*copy worker 0's "
            "/run/v.model to the others' /run/workers/worker-N/v.model",
        ):
            run_checks.check_workers_share_vocabulary(
                [(9, 10), (9, 11)], "/run", "v.model"
            )
        self.assertEqual(run_checks.worker_dir("/run", 0), "/run")
        self.assertEqual(
            run_checks.worker_dir("/run", 2), "/run/workers/worker-2"
        )

    @parameterized.parameters("mixed_bfloat16", "mixed_float16")
    def test_mixed_precision_step_with_xla(self, policy):
        # The GPU path (--mixed_precision with --jit_compile), on the CPU:
        # 16-bit compute, float32 weights and logits, a finite loss, and
        # loss scaling for float16.
        distribution.set_precision(policy)
        model = trainer.compile_for_training(
            build_transformer(tiny_config()), warmup_steps=10, jit_compile=True
        )
        features, labels = global_batch()
        before = model.get_weights()
        logs = model.train_on_batch(features, labels, return_dict=True)
        self.assertTrue(np.isfinite(logs["loss"]))
        self.assertEqual(
            model.get_layer("decoder").compute_dtype, policy.split("_")[1]
        )
        self.assertTrue(all(w.dtype == "float32" for w in model.weights))
        self.assertEqual(model(features).dtype, "float32")
        self.assertEqual(
            isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer),
            policy == "mixed_float16",
        )
        moved = [np.any(a != b) for a, b in zip(before, model.get_weights())]
        self.assertGreater(sum(moved), len(moved) // 2)

    @parameterized.parameters("float32", "mixed_bfloat16", "mixed_float16")
    def test_training_step_has_gpu_kernels_for_every_op(self, policy):
        # Without XLA, an op that no GPU kernel takes for its types would
        # run on the host of a GPU machine, its tensors copied there and
        # back at every step (tests/gpu_kernels.py reads the kernels that
        # TensorFlow's build registers for GPUs).
        model = trainer.compile_for_training(
            build_transformer(tiny_config(), dtype=policy),
            warmup_steps=10,
            jit_compile=False,
        )
        spec = tf.nest.map_structure(
            lambda x: tf.TensorSpec([None, None], x.dtype), global_batch()
        )
        step = tf.function(model.train_step).get_concrete_function(spec)
        graph = step.graph.as_graph_def()
        library = {f.signature.name: f for f in graph.library.function}
        # The step's own kernels: Adam's, dropout's random words, the
        # loss's gradient (under loss scaling, Adam's is in a branch).
        functions = library.values()
        nodes = [*graph.node, *(n for f in functions for n in f.node_def)]
        self.assertContainsSubset(
            {
                "ResourceApplyAdam",
                "StatelessRandomUniformFullIntV2",
                "TensorScatterSub",
            },
            {node.op for node in nodes},
        )
        self.assertEqual(sorted(cpu_only_ops(library, nodes=graph.node)), [])

    def test_step_settings_are_checked(self):
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "train for 4 or 6 steps, or checkpoint every k steps for a k "
                "that divides train_steps. "
                "Received: train_steps=5, steps_per_checkpoint=2"
            ),
        ):
            run_checks.check_steps(5, 2)
        with self.assertRaisesRegex(ValueError, "train for 200 steps, or"):
            run_checks.check_steps(150, 200)
        with self.assertRaisesRegex(ValueError, "must be positive"):
            run_checks.check_steps(0, 1)

    def test_a_run_past_train_steps_is_not_resumed(self):
        # It would train nothing, report step 150 and save model.keras again.
        with self.assertRaisesRegex(
            ValueError,
            "`train_steps` is below step 150, where the run in model_dir "
            "already is.*pass train_steps=150 to reuse the run.*"
            "Received: train_steps=100",
        ):
            run_checks.check_resume_step(150, train_steps=100)
        run_checks.check_resume_step(150, train_steps=150)  # Finished.
        run_checks.check_resume_step(150, train_steps=200)
