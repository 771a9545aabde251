"""Tests of gradient accumulation (`training/accumulation.py`)."""

import functools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import build_transformer
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import metrics, trainer
from keras_transformer.training.optimizer import StepCountingLossScaleOptimizer
from tests.test_case import TestCase, eight_replica_strategy
from tests.training.test_trainer import (
    assert_same_update,
    global_batch,
    tiny_config,
)


def split_batch(features, labels, sizes):
    """`(features, labels)` cut into batches of `sizes` sentences, each
    trimmed to its own longest source and target: batches of different
    shapes and token counts, as token batching makes them."""
    batches = []
    start = 0
    for size in sizes:
        rows = slice(start, start + size)
        source = features["source_ids"][rows]
        target = features["target_ids"][rows]
        y = labels[rows]
        source = source[:, : int(np.max(np.sum(source != 0, axis=1)))]
        length = int(np.max(np.sum(y != 0, axis=1)))
        batches.append(
            (
                {"source_ids": source, "target_ids": target[:, :length]},
                y[:, :length],
            )
        )
        start += size
    return batches


def group(batches):
    """The batches as one grouped element, as `batching.group_batches`."""
    return tf.nest.map_structure(
        lambda *parts: tf.ragged.stack([tf.constant(p) for p in parts]),
        *batches,
    )


def compiled(config, initial, gradient_accumulation_steps=1, jit_compile=False):
    model = build_transformer(config)
    model.set_weights(initial)
    return trainer.compile_for_training(
        model,
        warmup_steps=10,
        jit_compile=jit_compile,
        # SGD: the update is the gradient itself (Adam's first step is
        # sign(gradient), which hides a wrong scale).
        optimizer=keras.optimizers.SGD(1.0),
        gradient_accumulation_steps=gradient_accumulation_steps,
    )


def whole_batch_step(batch_size):
    """One step over a whole batch, without dropout (an exact reference):
    its config, batch, initial weights, stepped model and logs."""
    config = tiny_config(dropout=0.0, attention_dropout=0.0)
    features, labels = global_batch(batch_size=batch_size)
    keras.utils.set_random_seed(1)
    initial = build_transformer(config).get_weights()
    whole = compiled(config, initial)
    logs = whole.fit(
        tf.data.Dataset.from_tensors((features, labels)), verbose=0
    )
    return config, (features, labels), initial, whole, logs.history


class AccumulationTest(TestCase):
    def test_accumulated_step_is_the_step_over_all_batches(self):
        config, (features, labels), initial, whole, whole_logs = (
            whole_batch_step(7)
        )

        # 1 and 6 sentences, with different token counts: a mean of the
        # two batches' mean losses would weight their tokens unevenly.
        batches = split_batch(features, labels, (1, 6))
        counts = [np.sum(y != 0) for _, y in batches]
        self.assertGreater(max(counts), 2 * min(counts))
        # With XLA: each batch's pass is a cluster of its own shape (the
        # eight-replica test below runs the loop without XLA).
        accumulated = compiled(config, initial, 2, jit_compile=True)
        logs = accumulated.fit(
            tf.data.Dataset.from_tensors(group(batches)), verbose=0
        ).history

        # One update: the step counter (hence the schedule) counts updates.
        self.assertEqual(callbacks_lib.current_step(accumulated), 1)
        self.assertAllClose(logs["loss"], whole_logs["loss"], atol=1e-5)
        self.assertAllClose(
            logs["token_accuracy"], whole_logs["token_accuracy"], atol=1e-6
        )
        self.assertEqual(logs["target_tokens"], whole_logs["target_tokens"])
        assert_same_update(
            self, accumulated, whole, initial, atol=2e-6, rtol=1e-5
        )

    def test_a_last_group_of_fewer_batches_is_the_step_over_them(self):
        # A finite dataset's last group may hold fewer than N batches: the
        # step is over those, not N (nor does it index past them).
        config, (features, labels), initial, whole, whole_logs = (
            whole_batch_step(7)
        )
        accumulated = compiled(config, initial, 3)
        logs = accumulated.fit(
            tf.data.Dataset.from_tensors(
                group(split_batch(features, labels, (2, 5)))
            ),
            verbose=0,
        ).history
        self.assertEqual(callbacks_lib.current_step(accumulated), 1)
        self.assertAllClose(logs["loss"], whole_logs["loss"], atol=1e-5)
        self.assertEqual(logs["target_tokens"], whole_logs["target_tokens"])
        assert_same_update(
            self, accumulated, whole, initial, atol=2e-6, rtol=1e-5
        )

    def test_a_step_without_real_tokens_leaves_the_weights_alone(self):
        # Its token count is 0: the loss's and the update's divisions are
        # by at least 1, so the update is 0, not NaN (sentences that all
        # weigh 0; the per-replica XLA step shares these sums).
        config = tiny_config()
        initial = build_transformer(config).get_weights()
        model = compiled(config, initial, 2)
        features, labels = global_batch(batch_size=4, length=6)
        logs = model.fit(
            tf.data.Dataset.from_tensors(
                group(
                    [
                        (*batch, np.zeros(2, "float32"))
                        for batch in split_batch(features, labels, (2, 2))
                    ]
                )
            ),
            verbose=0,
        ).history
        self.assertEqual(logs["loss"], [0.0])
        for got, want in zip(model.get_weights(), initial):
            self.assertAllEqual(got, want)

    def test_sample_weights_weight_the_loss_and_metrics_as_in_one_batch(self):
        config = tiny_config(dropout=0.0, attention_dropout=0.0)
        features, labels = global_batch(batch_size=7)
        # Per sentence, one of them left out.
        weights = np.array([2.0, 0.5, 0.0, 1.0, 3.0, 1.5, 0.25], "float32")
        initial = build_transformer(config).get_weights()

        def step(gradient_accumulation_steps, data):
            model = compiled(config, initial, gradient_accumulation_steps)
            # `fit` passes its sample weights to `weighted_metrics` only.
            model.compile(
                optimizer=model.optimizer,
                loss=model.loss,
                metrics=[metrics.Perplexity(), metrics.TargetTokenCount()],
                weighted_metrics=[
                    metrics.Perplexity(name="weighted_perplexity")
                ],
                jit_compile=False,
            )
            logs = model.fit(tf.data.Dataset.from_tensors(data), verbose=0)
            return model, logs.history

        whole, whole_logs = step(1, (features, labels, weights))
        batches = [
            (*batch, part)
            for batch, part in zip(
                split_batch(features, labels, (1, 6)), np.split(weights, [1])
            )
        ]
        accumulated, logs = step(2, group(batches))
        # The weights matter to the metric.
        self.assertNotAllClose(
            whole_logs["weighted_perplexity"],
            whole_logs["perplexity"],
            rtol=1e-3,
        )
        for name in (
            "loss",
            "perplexity",
            "weighted_perplexity",
            "target_tokens",
        ):
            self.assertAllClose(
                logs[name], whole_logs[name], atol=1e-5, msg=name
            )
        assert_same_update(
            self, accumulated, whole, initial, atol=2e-6, rtol=1e-5
        )

    def test_a_group_of_more_batches_than_a_step_is_refused(self):
        config = tiny_config()
        model = compiled(config, build_transformer(config).get_weights(), 2)
        batches = split_batch(*global_batch(batch_size=6), (2, 2, 2))
        with self.assertRaisesRegex(
            ValueError,
            r"^With gradient_accumulation_steps=2, each dataset element must "
            r"hold the batches of a step.*Received: labels of shape \(3, ",
        ):
            model.fit(tf.data.Dataset.from_tensors(group(batches)), verbose=0)
        self.assertEqual(callbacks_lib.current_step(model), 0)

    def test_float16_step_scales_the_mean_loss_and_counts(self):
        # A float16 model's accumulated step at the default loss scale
        # (2**15): scaling the loss sum instead of the mean overflowed its
        # float16 gradients, and Keras's own loss scaling (without the
        # global policy) did not count that skipped step.
        config = tiny_config(dropout=0.0, attention_dropout=0.0)
        model = build_transformer(config, dtype="mixed_float16")
        initial = model.get_weights()
        trainer.compile_for_training(
            model,
            warmup_steps=10,
            jit_compile=False,
            gradient_accumulation_steps=2,
        )
        self.assertIsInstance(model.optimizer, StepCountingLossScaleOptimizer)
        batches = split_batch(*global_batch(batch_size=7), (1, 6))
        model.fit(tf.data.Dataset.from_tensors(group(batches)), verbose=0)
        self.assertEqual(float(model.optimizer.dynamic_scale), 2.0**15)
        self.assertEqual(callbacks_lib.current_step(model), 1)
        moved = [np.any(a != b) for a, b in zip(initial, model.get_weights())]
        self.assertGreater(sum(moved), len(moved) // 2)

    def test_a_saved_model_accumulates_again_when_loaded(self):
        # The settings lived beside `compile` only: the loaded model took a
        # grouped element as one batch (a Keras input shape error), and
        # compiling it again would have reset the optimizer.
        config = tiny_config(dropout=0.0, attention_dropout=0.0)
        model = compiled(config, build_transformer(config).get_weights(), 2)
        data = tf.data.Dataset.from_tensors(
            group(split_batch(*global_batch(batch_size=7), (1, 6)))
        )
        model.fit(data, verbose=0)
        path = os.path.join(self.get_temp_dir(), "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        self.assertEqual(loaded.gradient_accumulation_steps, 2)
        self.assertFalse(loaded.replica_jit_compile)
        loaded.fit(data, verbose=0)
        model.fit(data, verbose=0)
        self.assertEqual(callbacks_lib.current_step(loaded), 2)
        for got, want in zip(loaded.get_weights(), model.get_weights()):
            self.assertAllClose(got, want, atol=1e-6)

    def test_a_step_holds_one_batch_of_activations_at_a_time(self):
        # The batches' passes do not depend on each other, and a while
        # loop's default let the next batch's forward pass run beside the
        # last one's backward pass: a step held two to three batches'
        # activations (87-102 MiB here, not 35). The logits (32 x 32 x 4000
        # floats, 16 MB a batch) are most of a pass's memory here; the
        # weights are 0.5 MB.
        config = tiny_config(
            vocab_size=4000, dropout=0.0, attention_dropout=0.0
        )
        initial = build_transformer(config).get_weights()
        features, labels = global_batch(batch_size=32, length=32)

        def step_peak_mib(model, x, y):
            model.train_on_batch(x, y)  # traces
            peaks = []
            # The least of three: the allocator's counts are the process's,
            # and once in a full suite a step measured 16 MiB more (another
            # thread's allocation, or a rare op order); the regression
            # shows in every step.
            for _ in range(3):
                tf.config.experimental.reset_memory_stats("CPU:0")
                info = tf.config.experimental.get_memory_info
                before = info("CPU:0")["current"]
                model.train_on_batch(x, y)
                peaks.append((info("CPU:0")["peak"] - before) / 2**20)
            return min(peaks)

        one_batch = step_peak_mib(compiled(config, initial), features, labels)
        four_batches = step_peak_mib(
            compiled(config, initial, 4),
            {name: np.stack([ids] * 4) for name, ids in features.items()},
            np.stack([labels] * 4),
        )
        self.assertGreater(one_batch, 30)
        self.assertLess(four_batches, 1.3 * one_batch)

    def test_ungrouped_batches_are_refused(self):
        config = tiny_config()
        model = compiled(config, build_transformer(config).get_weights(), 2)
        # Also a batch of no more sentences than batches in a step, whose
        # sentences would pass for batches.
        for batch_size in (16, 2):
            with self.assertRaisesRegex(
                ValueError, "batches of a step.*group_batches"
            ):
                model.fit(
                    tf.data.Dataset.from_tensors(global_batch(batch_size)),
                    verbose=0,
                )

    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_eight_replicas_accumulate_the_single_device_step(self):
        config, (features, labels), initial, whole, _ = whole_batch_step(24)

        # Each replica's step: 2 batches of 1 and 2 sentences.
        groups = [
            group(split_batch(*part, (1, 2)))
            for part in split_batch(features, labels, [3] * 8)
        ]
        strategy = eight_replica_strategy()
        with strategy.scope():
            # Without XLA: its per-batch clusters would compile each of the
            # 16 shapes (the single-device test covers XLA).
            accumulated = compiled(config, initial, 2)

        def dataset_fn(context):
            # One group per replica (one input pipeline: in replica order).
            datasets = [tf.data.Dataset.from_tensors(g) for g in groups]
            return functools.reduce(tf.data.Dataset.concatenate, datasets)

        accumulated.fit(
            strategy.distribute_datasets_from_function(dataset_fn),
            steps_per_epoch=1,
            verbose=0,
        )
        self.assertEqual(callbacks_lib.current_step(accumulated), 1)
        assert_same_update(
            self, accumulated, whole, initial, atol=2e-5, rtol=1e-4
        )
