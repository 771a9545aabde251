"""Tests of the training callbacks on a tiny compiled model."""

import contextlib
import io
import json
import os
import re
from unittest import mock

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from keras_transformer import build_transformer, evaluation
from keras_transformer.data import pipeline
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import trainer
from keras_transformer.training.schedule import TransformerSchedule
from tests.data import fixtures
from tests.test_case import TestCase
from tests.training.test_trainer import bleu_by_step, global_batch, tiny_config


class PoisonAt(keras.callbacks.Callback):
    """Makes the weights NaN after step `step`: the next loss is NaN."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if callbacks_lib.current_step(self.model) == self.step:
            weight = self.model.trainable_weights[0]
            weight.assign(np.full(weight.shape, np.nan, "float32"))


def compiled_model():
    return trainer.compile_for_training(
        build_transformer(tiny_config()), 10, jit_compile=False
    )


def copy_translation(inputs):
    """A "translation" that copies its input (`Translator.translate`'s
    signature)."""
    return {"outputs": inputs}


def perfect_bleu(every_steps, final_step, translate=copy_translation, **kwargs):
    """A `DevEvaluator` whose "translation" (`translate`) copies the input,
    which is the reference."""
    return callbacks_lib.DevEvaluator(
        translate,
        [fixtures.PAIRS[0][1]],
        [fixtures.PAIRS[0][1]],
        "de",
        every_steps=every_steps,
        final_step=final_step,
        **kwargs,
    )


class CallbacksTest(TestCase):
    def test_logged_steps_of_a_truncated_event_file(self):
        # A run killed mid-write leaves a truncated record at the end of its
        # event file: the steps before it still count (its rerun must not
        # log them again).
        folder = fixtures.tempdir(self)
        writer = tf.summary.create_file_writer(folder)
        with writer.as_default():
            for step in (2, 6):
                tf.summary.scalar("epoch_bleu", 1.0, step=step)
                tf.summary.scalar("epoch_loss", 2.0, step=step)
            tf.summary.scalar("epoch_loss", 2.0, step=8)  # cut below
        writer.close()
        (path,) = tf.io.gfile.glob(os.path.join(folder, "events.out.*"))
        with open(path, "r+b") as file:
            file.truncate(os.path.getsize(path) - 5)  # the last record cut
        self.assertEqual(
            callbacks_lib.logged_steps(folder, "epoch_bleu"), [2, 6]
        )

    def test_a_failed_save_leaves_the_earlier_checkpoint(self):
        # Killed or failing mid-write, a save leaves no truncated
        # ckpt-N.keras where averaging and resumption read it.
        folder = fixtures.tempdir(self)
        path = os.path.join(folder, "ckpt-2.keras")
        model = build_transformer(tiny_config())
        callbacks_lib.save_model(model, path)
        saved = os.path.getsize(path)

        def fail_midway(partial):
            with open(partial, "wb") as file:
                file.write(b"PK")
            raise OSError("No space left on device")

        with (
            mock.patch.object(model, "save", side_effect=fail_midway),
            self.assertRaisesRegex(OSError, "No space left"),
        ):
            callbacks_lib.save_model(model, path)
        self.assertEqual(os.listdir(folder), ["ckpt-2.keras"])
        self.assertEqual(os.path.getsize(path), saved)

    def fit(self, callbacks, epochs=3, model=None, steps_per_epoch=2):
        model = model or compiled_model()
        dataset = tf.data.Dataset.from_tensors(global_batch()).repeat()
        return model, model.fit(
            dataset,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
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
        self.assertEqual(
            history.history["target_tokens"][-1], 2 * np.sum(labels != 0)
        )
        self.assertTrue(
            all(r > 0 for r in history.history["tokens_per_second"])
        )
        # The rate of the schedule at the step reached, per epoch.
        schedule = TransformerSchedule(32, warmup_steps=10)
        self.assertAllClose(
            history.history["learning_rate"],
            [float(schedule(step)) for step in (2, 4, 6)],
        )

    def test_tokens_per_second_is_the_epochs_target_tokens_over_its_seconds(
        self,
    ):
        # A clock that reads 100 s and 104 s at the first epoch's start and
        # end, 105 s and 107 s at the second's.
        clock = mock.Mock()
        clock.perf_counter.side_effect = [100.0, 104.0, 105.0, 107.0]
        with mock.patch.object(callbacks_lib, "time", clock):
            _, history = self.fit([callbacks_lib.ThroughputLogger()], epochs=2)
        self.assertEqual(clock.perf_counter.call_count, 4)
        # Two steps per epoch of the same batch, in 4 s, then in 2 s.
        tokens = 2 * np.sum(global_batch()[1] != 0)
        self.assertEqual(history.history["target_tokens"], [tokens, tokens])
        self.assertAllClose(
            history.history["tokens_per_second"], [tokens / 4, tokens / 2]
        )

    def test_bleu_is_evaluated_every_k_steps(self):
        calls = []

        def translate(inputs):
            calls.append(len(inputs))
            return copy_translation(inputs)

        model = compiled_model()

        def perplexity():
            # Called at the step scored: the step stands for the value.
            step = callbacks_lib.current_step(model)
            stats = pipeline.DataStats(1, 0, 0, 1, 6, 6)
            return evaluation.Perplexity(float(step), 7, stats)

        bleu = perfect_bleu(
            every_steps=4,
            final_step=6,
            translate=translate,
            perplexity_fn=perplexity,
        )
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            _, history = self.fit([bleu], model=model)
        self.assertEqual(calls, [1, 1])  # steps 4 and 6, not 2
        self.assertAlmostEqual(bleu.last_scores.bleu, 100.0)
        self.assertAllClose(history.history["bleu"], [100.0, 100.0])
        self.assertEqual(history.history["perplexity"], [4.0, 6.0])
        self.assertEqual(bleu.last_perplexity.perplexity, 6.0)
        self.assertRegex(
            printed.getvalue(),
            r"step 6: dev BLEU 100.00 chrF 100.00 \(1 sentences; .*\), "
            r"perplexity 6.000 \(1 of 1 pairs, 7 target tokens\)\n",
        )

    def test_a_run_that_trained_no_epoch_is_scored_only_at_its_final_step(
        self,
    ):
        # The rerun of a finished run scores its final model; a run short
        # of the final step has none to score.
        calls = []

        def translate(inputs):
            calls.append(len(inputs))
            return copy_translation(inputs)

        model = compiled_model()
        bleu = perfect_bleu(every_steps=2, final_step=6, translate=translate)
        bleu.set_model(model)
        for step, want in ((4, []), (6, [1])):
            model.optimizer.iterations.assign(step)
            bleu.on_train_begin()
            bleu.on_train_end()
            self.assertEqual(calls, want)
        self.assertAlmostEqual(bleu.last_scores.bleu, 100.0)

    def test_bleu_is_abandoned_when_interrupted(self):
        # 70 sentences: batches of 32, 32 and 6; the signal comes during the
        # second.
        sources = [f"{index} {fixtures.PAIRS[0][1]}" for index in range(70)]
        calls = []

        def translate(inputs):
            calls.append(len(inputs))
            return copy_translation(inputs)

        bleu = callbacks_lib.DevEvaluator(
            translate,
            sources,
            sources,
            "de",
            every_steps=2,
            final_step=6,
            interrupted=lambda: len(calls) == 2,
        )
        with self.assertLogs("absl", "WARNING") as logs:
            _, history = self.fit([bleu], epochs=1)
        self.assertEqual(calls, [32, 32])
        (message,) = logs.output
        self.assertIn("abandoned after 64 of 70 sentences", message)
        self.assertIsNone(bleu.last_scores)
        self.assertNotIn("bleu", history.history)
        # Pending before it starts: not one batch.
        calls.clear()
        bleu.interrupted = lambda: True
        self.fit([bleu], epochs=1)
        self.assertEqual(calls, [])
        # After the last batch: scored, as nothing is left to save time on.
        calls.clear()
        bleu.interrupted = lambda: len(calls) == 3
        self.fit([bleu], epochs=1)
        self.assertEqual(calls, [32, 32, 6])
        self.assertAlmostEqual(bleu.last_scores.bleu, 100.0)

    def test_keeps_the_model_of_the_best_bleu_through_reruns(self):
        folder = fixtures.tempdir(self)
        path = os.path.join(folder, "best_model.keras")
        record_path = os.path.join(folder, "best_model.json")
        reference = fixtures.PAIRS[0][1]  # "Die Katze schläft auf dem Sofa."
        model = compiled_model()
        # The dev "translation" at each step: BLEU 100 at steps 4, 8 and 12,
        # less at the others (0 for "Sofa").
        short = reference.rsplit(" ", 1)[0]
        by_step = {2: short, 4: reference, 6: "Sofa", 8: reference}
        by_step.update({10: "Sofa", 12: reference, 14: short, 16: "Sofa"})
        by_step.update({18: short, 20: reference})

        def translate(inputs):
            step = callbacks_lib.current_step(model)
            return {"outputs": tf.constant([by_step[step]] * len(inputs))}

        def perplexity():  # The step stands for the value.
            step = callbacks_lib.current_step(model)
            stats = pipeline.DataStats(2, 0, 0, 2, 12, 12)
            return evaluation.Perplexity(float(step), 14, stats)

        weights, saved = {}, []
        save_model = callbacks_lib.save_model

        def save(saved_model, saved_path):
            saved.append(callbacks_lib.current_step(saved_model))
            save_model(saved_model, saved_path)

        class KeepWeights(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                weights[callbacks_lib.current_step(model)] = model.get_weights()

        def run(epochs, sentences=2, save=save):
            evaluator = callbacks_lib.DevEvaluator(
                translate,
                [reference] * sentences,
                [reference] * sentences,
                "de",
                every_steps=2,
                final_step=100,
                perplexity_fn=perplexity,
            )
            keeper = callbacks_lib.KeepBestModel(evaluator, path)
            with mock.patch.object(callbacks_lib, "save_model", save):
                self.fit([evaluator, keeper, KeepWeights()], epochs, model)
            return keeper

        def record():
            with open(record_path) as file:
                return json.load(file)

        keeper = run(epochs=4)  # steps 2, 4, 6, 8
        self.assertEqual(saved, [2, 4])  # Not 8: a tie keeps the earlier.
        self.assertEqual(record(), keeper.best)
        self.assertEqual(
            {key: keeper.best[key] for key in ("step", "sentences")},
            {"step": 4, "sentences": 2},
        )
        self.assertAlmostEqual(keeper.best["bleu"], 100.0)
        self.assertAlmostEqual(keeper.best["chrf"], 100.0)
        self.assertEqual(keeper.best["perplexity"], 4.0)
        self.assertStartsWith(keeper.best["bleu_signature"], "nrefs:1|")
        best = keras.models.load_model(path)
        for loaded, kept in zip(best.get_weights(), weights[4], strict=True):
            self.assertAllEqual(loaded, kept)
        self.assertNotAllClose(weights[4][0], weights[8][0])
        # A rerun (a resumed run) goes on from the record: 100 at step 12
        # is no better.
        kept = record()
        keeper = run(epochs=2)  # steps 10, 12
        self.assertEqual((saved, keeper.best, record()), ([2, 4], kept, kept))
        # A record whose model was deleted, or scored on other sentences,
        # is no best to keep.
        os.remove(path)
        with self.assertLogs("absl", "WARNING") as logs:
            keeper = run(epochs=1)  # step 14
        self.assertIn(f"its model, {path}, is missing", logs.output[0])
        self.assertEqual((saved[-1], keeper.best["step"]), (14, 14))
        with self.assertLogs("absl", "WARNING") as logs:
            keeper = run(epochs=1, sentences=3)  # step 16, BLEU 0
        self.assertIn(
            "scored on 2 dev sentences, this run scores 3", logs.output[0]
        )
        self.assertEqual((saved[-1], record()["step"]), (16, 16))

        # A save that fails (a kill) leaves a record that says its model
        # is not written, never one naming another model; the resumed run
        # starts the best over, and keeps the improvements.
        def fail(saved_model, saved_path):
            raise OSError("disk full")

        with self.assertRaisesRegex(OSError, "disk full"):
            run(epochs=1, sentences=3, save=fail)  # step 18, BLEU > 0
        self.assertEqual(
            (record()["step"], record()["model_saved"]), (18, False)
        )
        # (Resumed from the backup of step 16, it scores step 18 again.)
        model.optimizer.iterations.assign(16)
        with self.assertLogs("absl", "WARNING") as logs:
            keeper = run(epochs=1, sentences=3)
        self.assertIn("the run stopped while it wrote", logs.output[0])
        self.assertEqual(keeper.best, record())
        self.assertEqual(
            [(step, bleu > 0) for step, bleu in keeper.improvements],
            [(16, False), (18, True)],
        )
        self.assertTrue(record()["model_saved"])
        # A damaged record stops the run before it trains, naming it.
        for content, problem in (
            ("{", "not JSON: Expecting"),
            ("[4]", "its 'step' is None, not a number"),
            ('{"step": 4, "sentences": 2}', "its 'bleu' is None"),
            ('{"step": 4, "bleu": true, "sentences": 2}', "its 'bleu' is True"),
            (
                '{"step": 4, "bleu": 1, "sentences": 2, "improvements": [4]}',
                "its 'improvements' are [4], not a list of [step, bleu] pairs",
            ),
            (
                '{"step": 4, "bleu": 1, "sentences": 2, "improvements": [[4]]}',
                "its 'improvements' are [[4]], not a list",
            ),
            (
                '{"step": 4, "bleu": 1, "sentences": 2, "model_saved": 1}',
                "its 'model_saved' is 1, not true or false",
            ),
        ):
            with open(record_path, "w") as file:
                file.write(content)
            with self.assertRaisesRegex(
                ValueError,
                re.escape(f"The record of the best model is damaged ({problem}")
                + ".*delete it .*Received: path=.*best_model.json$",
            ):
                run(epochs=1)
            self.assertEqual(callbacks_lib.current_step(model), 18)

    def test_a_resumed_run_scores_the_step_whose_bleu_it_skipped(self):
        # A signal at an interval's end skips its BLEU (the backup comes
        # first); the run resumed there scores it before it trains on, and
        # the best model may be its.
        folder = fixtures.tempdir(self)
        summary_dir = os.path.join(folder, "logs", "train")
        path = os.path.join(folder, "best_model.keras")
        model = compiled_model()
        model.optimizer.iterations.assign(4)
        scored = []

        def translate(inputs):
            scored.append(callbacks_lib.current_step(model))
            return copy_translation(inputs)

        def callbacks():
            evaluator = perfect_bleu(
                every_steps=2,
                final_step=8,
                translate=translate,
                summary_dir=summary_dir,
            )
            return evaluator, callbacks_lib.KeepBestModel(evaluator, path)

        evaluator, keeper = callbacks()
        self.fit([evaluator, keeper], epochs=2, model=model)  # steps 6, 8
        self.assertEqual(scored, [4, 6, 8])
        self.assertEqual(keeper.best["step"], 4)
        # Written as TensorBoard writes an epoch's (which it was not).
        self.assertEqual(
            callbacks_lib.logged_steps(summary_dir, "epoch_bleu"), [4]
        )

        def rerun():  # Of the finished run: `fit` trains no epoch.
            evaluator, keeper = callbacks()
            for callback in (evaluator, keeper):
                callback.set_model(model)
                callback.on_train_begin()
            for callback in (evaluator, keeper):
                callback.on_train_end()
            return keeper

        # It scores its final model again; the best stays step 4's.
        self.assertEqual(rerun().best["step"], 4)
        self.assertEqual(scored, [4, 6, 8, 8])
        os.remove(path)  # The best starts over: the final model.
        with self.assertLogs("absl", "WARNING"):
            keeper = rerun()
        self.assertEqual((scored[-1], keeper.best["step"]), (8, 8))

    def test_early_stopping_ends_the_run_after_patience_evaluations(self):
        folder = fixtures.tempdir(self)
        summary_dir = os.path.join(folder, "logs", "train")
        reference = fixtures.PAIRS[0][1]
        short = reference.rsplit(" ", 1)[0]
        # The best is step 4's, tied at step 10; BLEU 0 for "Sofa".
        by_step = {2: "Sofa", 4: short, 6: "Sofa", 8: "Sofa", 10: short}
        by_step.update({12: "Sofa", 14: "Sofa", 16: reference, 18: "Sofa"})
        model = compiled_model()
        scored = []

        def translate(inputs):
            scored.append(callbacks_lib.current_step(model))
            return {"outputs": tf.constant([by_step[scored[-1]]] * len(inputs))}

        def run(epochs, patience=2, final_step=100, interrupted=None):
            evaluator = perfect_bleu(
                every_steps=2,
                final_step=final_step,
                translate=translate,
                summary_dir=summary_dir,
                interrupted=interrupted,
            )
            keeper = callbacks_lib.KeepBestModel(
                evaluator, os.path.join(folder, "best_model.keras")
            )
            stopper = callbacks_lib.EarlyStoppingOnBleu(
                keeper, patience, every_steps=2
            )
            self.fit([evaluator, keeper, stopper], epochs, model)
            return stopper

        def step():
            return callbacks_lib.current_step(model)

        # Steps 6 and 8 bring nothing above step 4's: 2 evaluations.
        stopper = run(epochs=10)
        self.assertEqual((stopper.stopped_step, scored), (8, [2, 4, 6, 8]))
        self.assertEqual(step(), 8)
        # A rerun (8 is not in the summaries, which TensorBoard writes in
        # a run: as after a signal that skipped its BLEU) scores step 8,
        # and stops before any step; so does the next, which scores it
        # again (as the rerun of a finished run does).
        for _ in range(2):
            stopper = run(epochs=10)
            self.assertEqual((stopper.stopped_step, step()), (8, 8))
        self.assertEqual(scored, [2, 4, 6, 8, 8, 8])
        self.assertEqual(
            callbacks_lib.logged_steps(summary_dir, "epoch_bleu"), [8]
        )
        # A larger patience goes on; the tie at step 10 is no better.
        stopper = run(epochs=10, patience=3)
        self.assertEqual((stopper.stopped_step, scored[-2:]), (10, [8, 10]))
        # Never before `patience` evaluations since the best.
        stopper = run(epochs=1, patience=5)
        self.assertEqual((stopper.stopped_step, step()), (None, 12))
        # Nor at the last step (5 evaluations after the best), which ends
        # the run anyway.
        stopper = run(epochs=1, patience=5, final_step=14)
        self.assertEqual((stopper.stopped_step, step()), (None, 14))

        # Resumed at a step whose BLEU a signal skipped (16): a signal
        # during its scoring stops the run before any step, its decision
        # unmade.
        self.fit([], epochs=1, model=model)
        stopper = run(epochs=1, interrupted=lambda: True)
        self.assertEqual((stopper.stopped_step, step()), (None, 16))
        self.assertTrue(model.stop_training)
        # Scored, it is the new best: the run goes on.
        stopper = run(epochs=1)
        self.assertEqual((stopper.stopped_step, step()), (None, 18))
        self.assertEqual(scored[-2:], [16, 18])
        # Resumed off the evaluation steps with a lower patience: no BLEU
        # there, no stop.
        self.fit([], epochs=1, model=model, steps_per_epoch=1)
        stopper = run(epochs=1, patience=1)
        self.assertEqual((stopper.stopped_step, step()), (None, 21))

    def test_early_stopping_decides_as_keras_early_stopping(self):
        # Keras's `EarlyStopping` on the logged BLEU is the oracle for when
        # a run stops, `min_delta` included: random BLEU curves in
        # multiples of 0.25 (exact in floating point, so gains equal to
        # `min_delta` occur and are not enough).
        model = compiled_model()
        rng = np.random.default_rng(0)
        stopped = []
        for patience, min_delta in ((1, 0.0), (2, 0.5), (3, 1.0), (4, 0.25)):
            start = callbacks_lib.current_step(model)
            gains = rng.choice([-1.0, -0.25, 0.0, 0.25, 0.5, 0.75, 1.5], 10)
            values = np.cumsum(gains) + 10.0
            by_step = {start + 2 * (i + 1): v for i, v in enumerate(values)}
            evaluator = perfect_bleu(every_steps=2, final_step=1000)
            keeper = callbacks_lib.KeepBestModel(
                evaluator,
                os.path.join(fixtures.tempdir(self), "best_model.keras"),
            )
            stopper = callbacks_lib.EarlyStoppingOnBleu(
                keeper, patience, every_steps=2, min_delta=min_delta
            )
            oracle = keras.callbacks.EarlyStopping(
                "bleu", min_delta=min_delta, patience=patience, mode="max"
            )
            with (
                self.subTest(patience=patience, min_delta=min_delta),
                bleu_by_step(
                    by_step, lambda: callbacks_lib.current_step(model)
                ),
            ):
                self.fit([evaluator, keeper, stopper, oracle], 10, model)
                oracle_step = (
                    start + 2 * (oracle.stopped_epoch + 1)
                    if oracle.stopped_epoch
                    else None
                )
                self.assertEqual(stopper.stopped_step, oracle_step)
                stopped.append(oracle_step is not None)
        # Both outcomes occur: the comparison is no vacuous one.
        self.assertCountEqual(set(stopped), [True, False])

    def test_early_stopping_min_delta_through_reruns(self):
        folder = fixtures.tempdir(self)
        summary_dir = os.path.join(folder, "logs", "train")
        record_path = os.path.join(folder, "best_model.json")
        model = compiled_model()
        # Each a new best; only 6's gains more than 0.5 over the
        # reference (step 2's) before step 14's 11.3, which gains 0.5
        # exactly over step 6's: not more.
        by_step = {2: 10.0, 4: 10.4, 6: 10.8, 8: 11.0, 10: 11.2}
        by_step.update({12: 11.1, 14: 11.3, 16: 11.0})

        def run(epochs, min_delta=0.5, patience=2):
            evaluator = perfect_bleu(
                every_steps=2, final_step=100, summary_dir=summary_dir
            )
            keeper = callbacks_lib.KeepBestModel(
                evaluator, os.path.join(folder, "best_model.keras")
            )
            stopper = callbacks_lib.EarlyStoppingOnBleu(
                keeper, patience, every_steps=2, min_delta=min_delta
            )
            with bleu_by_step(
                by_step, lambda: callbacks_lib.current_step(model)
            ):
                self.fit([evaluator, keeper, stopper], epochs, model)
            return keeper, stopper

        def stop():
            return stopper.stopped_step, stopper.improved_step

        keeper, stopper = run(epochs=10)
        self.assertEqual(stop(), (10, 6))
        self.assertEqual(keeper.best["step"], 10)
        self.assertEqual(
            keeper.best["improvements"],
            [[2, 10.0], [4, 10.4], [6, 10.8], [8, 11.0], [10, 11.2]],
        )
        self.assertEqual(stopper.reference(10), [6, 10.8])
        self.assertEqual(stopper.reference(5), [2, 10.0])
        # Its rerun stops again before any step; one without the minimum
        # gain goes on (step 10 is the reference), to the new best at 14.
        _, stopper = run(epochs=10)
        self.assertEqual(
            (stop(), callbacks_lib.current_step(model)), ((10, 6), 10)
        )
        _, stopper = run(epochs=2, min_delta=0.0)
        self.assertEqual(
            (stop(), callbacks_lib.current_step(model)), ((None, None), 14)
        )
        # With it, 14's gain of 0.5 over step 6's does not count.
        keeper, stopper = run(epochs=10)
        self.assertEqual(
            (stop(), callbacks_lib.current_step(model)), ((14, 6), 14)
        )
        self.assertEqual(keeper.best["improvements"][-1], [14, 11.3])
        # A record written before the improvements were kept: its own step
        # is the reference.
        with open(record_path) as file:
            record = json.load(file)
        del record["improvements"]
        with open(record_path, "w") as file:
            json.dump(record, file)
        _, stopper = run(epochs=10, patience=1)
        self.assertEqual(
            (stop(), callbacks_lib.current_step(model)), ((16, 14), 16)
        )

    def test_early_stopping_without_summaries_scores_the_resumed_step(self):
        # Without summaries nothing tells whether a resumed step's BLEU was
        # scored: the rerun of a run stopped early scores it, and stops
        # again; one resumed with a larger patience trains on.
        model = compiled_model()
        folder = fixtures.tempdir(self)
        by_step = {2: 10.0, 4: 9.0, 6: 8.0, 8: 12.0}
        scored = []

        def translate(inputs):
            scored.append(callbacks_lib.current_step(model))
            return copy_translation(inputs)

        def run(epochs, patience):
            evaluator = perfect_bleu(2, 100, translate=translate)
            keeper = callbacks_lib.KeepBestModel(
                evaluator, os.path.join(folder, "best.keras")
            )
            stopper = callbacks_lib.EarlyStoppingOnBleu(
                keeper, patience, every_steps=2
            )
            with bleu_by_step(
                by_step, lambda: callbacks_lib.current_step(model)
            ):
                self.fit([evaluator, keeper, stopper], epochs, model)
            return stopper.stopped_step

        self.assertEqual(run(epochs=5, patience=1), 4)
        self.assertEqual(run(epochs=5, patience=1), 4)
        self.assertEqual(
            (scored, callbacks_lib.current_step(model)), ([2, 4, 4], 4)
        )
        # Not where the reference is too recent for the run to stop.
        self.assertIsNone(run(epochs=1, patience=3))
        self.assertEqual(
            (scored, callbacks_lib.current_step(model)), ([2, 4, 4, 6], 6)
        )

    def test_early_stopping_min_delta_is_a_bleu_gain(self):
        keeper = callbacks_lib.KeepBestModel(
            perfect_bleu(every_steps=2, final_step=10), os.devnull
        )
        for min_delta in (-0.5, float("inf"), True, "0.5"):
            with self.assertRaisesRegex(
                ValueError,
                re.escape(f"Received: min_delta={min_delta!r}") + "$",
            ):
                callbacks_lib.EarlyStoppingOnBleu(
                    keeper, 2, every_steps=2, min_delta=min_delta
                )

    def test_early_stopping_follows_the_first_worker(self):
        model = compiled_model()
        evaluator = perfect_bleu(every_steps=4, final_step=100)
        keeper = callbacks_lib.KeepBestModel(
            evaluator, os.path.join(fixtures.tempdir(self), "best.keras")
        )
        stopper = callbacks_lib.EarlyStoppingOnBleu(keeper, 1, every_steps=4)
        # Steps 4 and 8 score alike: stalled at 8 here, not on worker 0.
        with mock.patch.object(
            callbacks_lib.distribution,
            "values_of_workers",
            side_effect=lambda strategy, values: np.array([[0], values]),
        ) as agree:
            self.fit([evaluator, keeper, stopper], epochs=5, model=model)
        self.assertIsNone(stopper.stopped_step)
        self.assertEqual(callbacks_lib.current_step(model), 10)
        # At the start and at each epoch's end (scored or not), on every
        # worker.
        self.assertEqual(
            [call.args[1] for call in agree.call_args_list],
            [[0], [0], [0], [0], [1], [0]],
        )

    def test_bleu_needs_matching_references(self):
        with self.assertRaisesRegex(ValueError, "len\\(references\\)=0"):
            callbacks_lib.DevEvaluator(
                list, ["a"], [], "de", every_steps=1, final_step=1
            )
        # And a sentence: sacreBLEU of nothing is no score.
        with self.assertRaisesRegex(
            ValueError,
            r"at least one. Received: len\(sources\)=0, "
            r"len\(references\)=0$",
        ):
            callbacks_lib.DevEvaluator(
                list, [], [], "de", every_steps=1, final_step=1
            )

    def test_keep_must_be_positive(self):
        with self.assertRaisesRegex(ValueError, "Received: keep=0"):
            callbacks_lib.KeepLastCheckpoints(os.devnull, keep=0)

    @parameterized.named_parameters(
        ("at_an_interval_end", 5),  # The NaN loss is step 6's.
        ("mid_interval", 4),  # Step 5's: fit stops off the interval grid.
    )
    def test_nothing_is_saved_after_a_nan_loss(self, poison_step):
        # Intervals of 3 steps: steps 1-3 are clean, 4-6 end in a NaN loss.
        folder = fixtures.tempdir(self)
        checkpoint_dir = os.path.join(folder, "checkpoints")
        backup_dir = os.path.join(folder, "backup")
        nan_stop = callbacks_lib.StopOnNaN()
        bleu = perfect_bleu(every_steps=3, final_step=6)
        evaluated = []
        record = keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: evaluated.append("bleu" in logs)
        )
        backup = callbacks_lib.ResumableBackup(backup_dir, steps_per_epoch=3)
        model, _ = self.fit(
            [
                PoisonAt(poison_step),
                nan_stop,
                callbacks_lib.KeepLastCheckpoints(checkpoint_dir, keep=5),
                bleu,
                record,
                backup,
            ],
            epochs=2,
            steps_per_epoch=3,
        )
        self.assertEqual(nan_stop.nan_step, poison_step + 1)
        self.assertEqual(callbacks_lib.current_step(model), poison_step + 1)
        # Only the interval whose every loss was finite was saved.
        self.assertEqual(
            [
                step
                for step, _ in callbacks_lib.list_checkpoints(checkpoint_dir)
            ],
            [3],
        )
        self.assertEqual(evaluated, [True, False])
        self.assertEqual(backup.saved_step, 3)
        # A rerun resumes from there, with finite weights.
        rerun = compiled_model()
        restore = callbacks_lib.ResumableBackup(backup_dir, steps_per_epoch=3)
        restore.set_model(rerun)
        restore.on_train_begin()
        self.assertEqual(callbacks_lib.current_step(rerun), 3)
        self.assertEqual(rerun._initial_epoch, 1)
        # Where a rerun of the rerun would resume, before it saves again.
        self.assertEqual(restore.saved_step, 3)
        self.assertTrue(all(np.isfinite(w).all() for w in rerun.get_weights()))

    def test_backup_saves_whole_intervals_only(self):
        backup_dir = os.path.join(fixtures.tempdir(self), "backup")
        backup = callbacks_lib.ResumableBackup(backup_dir, steps_per_epoch=2)
        stop = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: setattr(
                model, "stop_training", callbacks_lib.current_step(model) == 3
            )
        )
        model = compiled_model()
        self.fit([stop, backup], model=model)
        # Stopped (with a finite loss) at step 3: the resume point stays at
        # the end of the last whole interval, so a rerun ends on the grid.
        self.assertEqual(callbacks_lib.current_step(model), 3)
        self.assertEqual(backup.saved_step, 2)

    def test_resume_step_warns_when_the_batching_or_schedule_changed(self):
        backup_dir = os.path.join(fixtures.tempdir(self), "backup")
        batching = {"batch_tokens": 64, "replicas": 1}
        schedule = {"warmup_steps": 40, "learning_rate_scale": 1.0}
        self.fit(
            [callbacks_lib.ResumableBackup(backup_dir, 2, batching, schedule)],
            epochs=1,
        )
        resume_step = callbacks_lib.ResumableBackup.resume_step
        with self.assertNoLogs("absl", "WARNING"):
            self.assertEqual(resume_step(backup_dir, batching, schedule), 2)
        with self.assertLogs("absl", "WARNING") as logs:
            step = resume_step(
                backup_dir,
                {"batch_tokens": 64, "replicas": 8},
                {"warmup_steps": 400, "learning_rate_scale": 1.0},
            )
        self.assertEqual(step, 2)
        batching_message, schedule_message = logs.output
        self.assertIn(
            "Resuming at step 2 with other batching", batching_message
        )
        self.assertIn("replicas 1 -> 8", batching_message)
        self.assertNotIn("batch_tokens", batching_message)
        self.assertIn(
            "another learning-rate schedule than the run had "
            "(warmup_steps 40 -> 400): training goes on from the backup, "
            "but at other learning rates",
            schedule_message,
        )
        self.assertNotIn("learning_rate_scale", schedule_message)

    def test_a_backup_of_another_model_fails_in_one_line(self):
        backup_dir = os.path.join(fixtures.tempdir(self), "backup")
        self.fit([callbacks_lib.ResumableBackup(backup_dir, 2)], epochs=1)
        other = trainer.compile_for_training(
            build_transformer(tiny_config(num_layers=2)), 10, jit_compile=False
        )
        restore = callbacks_lib.ResumableBackup(backup_dir, 2)
        restore.set_model(other)
        with self.assertRaisesRegex(
            ValueError, "another model config"
        ) as caught:
            restore.on_train_begin()
        self.assertNotIn("\n", str(caught.exception))
        self.assertIn(
            f"Received: backup_dir={backup_dir}", str(caught.exception)
        )

    def test_a_backup_with_other_dropout_seed_states_is_refused(self):
        # Without dropout the weights fit, but the 7 seed states of the
        # backup's dropout layers have no layer to go to.
        backup_dir = os.path.join(fixtures.tempdir(self), "backup")
        self.fit([callbacks_lib.ResumableBackup(backup_dir, 2)], epochs=1)
        other = trainer.compile_for_training(
            build_transformer(tiny_config(dropout=0.0)), 10, jit_compile=False
        )
        restore = callbacks_lib.ResumableBackup(backup_dir, 2)
        restore.set_model(other)
        with self.assertRaisesRegex(
            ValueError,
            "^The backup holds 7 dropout seed states and the model has 0: the "
            "run it belongs to has another model config.*"
            f"Received: backup_dir={backup_dir}$",
        ):
            restore.on_train_begin()
