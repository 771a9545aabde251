import json
import re

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.training import (
    LabelSmoothedCrossEntropy,
    MaskedTokenAccuracy,
    Perplexity,
)
from keras_transformer.training.metrics import TargetTokenCount
from tests.test_case import TestCase, eight_replica_strategy


def reference_token_losses(labels, logits, eps):
    vocab = logits.shape[-1]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    target = np.full(logits.shape, eps / vocab)
    np.put_along_axis(target, labels[..., None], 1 - eps + eps / vocab, -1)
    return -(target * logp).sum(-1)


def reference_loss(labels, logits, eps, pad_id=0, token_weights=1.0):
    per_token = reference_token_losses(labels, logits, eps)
    weights = (labels != pad_id) * token_weights
    return (per_token * weights).sum() / weights.sum()


class LabelSmoothedCrossEntropyTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.logits = rng.normal(size=(3, 5, 11)).astype("float32")
        self.labels = rng.integers(1, 11, size=(3, 5)).astype("int32")
        self.labels[0, 3:] = 0
        self.labels[2, 1:] = 0

    def test_equals_smoothed_distribution_cross_entropy(self):
        for eps in (0.0, 0.1, 0.3):
            loss = LabelSmoothedCrossEntropy(label_smoothing=eps)
            self.assertAllClose(
                float(loss(self.labels, self.logits)),
                reference_loss(self.labels, self.logits, eps),
                rtol=1e-5,
            )

    def test_gradient_is_softmax_minus_smoothed_target(self):
        # d loss / d logits = (softmax(z) - q) * weight / real tokens.
        for eps in (0.0, 0.1):
            logits = tf.constant(self.logits)
            with tf.GradientTape() as tape:
                tape.watch(logits)
                value = LabelSmoothedCrossEntropy(eps)(self.labels, logits)
            got = tape.gradient(value, logits).numpy()
            vocab = self.logits.shape[-1]
            probs = np.exp(self.logits) / np.exp(self.logits).sum(
                -1, keepdims=True
            )
            target = np.full(self.logits.shape, eps / vocab)
            np.put_along_axis(
                target, self.labels[..., None], 1 - eps + eps / vocab, -1
            )
            weights = (self.labels != 0)[..., None]
            self.assertAllClose(
                got, (probs - target) * weights / weights.sum(), atol=1e-6
            )

    def test_padding_is_ignored_and_normalised_per_real_token(self):
        loss = LabelSmoothedCrossEntropy(0.1)
        changed = self.logits.copy()
        changed[0, 3:] += 100.0  # logits at padded labels
        self.assertAllClose(
            float(loss(self.labels, self.logits)),
            float(loss(self.labels, changed)),
        )
        # One long sentence and the same sentence padded twice over give
        # the same per-token loss.
        padded_labels = np.concatenate([self.labels, 0 * self.labels], 1)
        padded_logits = np.concatenate([self.logits, self.logits], 1)
        self.assertAllClose(
            float(loss(self.labels, self.logits)),
            float(loss(padded_labels, padded_logits)),
        )

    def test_global_token_normalisation_across_replicas(self):
        strategy = eight_replica_strategy()
        devices = strategy.extended.worker_devices
        loss = LabelSmoothedCrossEntropy(0.1)
        # Uneven real-token counts: replica 0 gets sentence 0 (3 tokens),
        # replica 1 sentences 1 and 2 (5 + 1 tokens), the others nothing.
        shards = [
            (self.labels[:1], self.logits[:1]),
            (self.labels[1:], self.logits[1:]),
        ] + [(self.labels[:0], self.logits[:0])] * (len(devices) - 2)
        values = strategy.experimental_distribute_values_from_function(
            lambda context: shards[context.replica_id_in_sync_group]
        )
        per_replica = strategy.run(lambda batch: loss(*batch), args=(values,))
        # Gradients of the replicas are summed, so the replicas' losses
        # must sum to the loss of the global batch on one device.
        total = strategy.reduce("sum", per_replica, axis=None)
        self.assertAllClose(
            float(total),
            reference_loss(self.labels, self.logits, 0.1),
            rtol=1e-5,
        )

    def test_sample_weights_weight_tokens(self):
        loss = LabelSmoothedCrossEntropy(0.1)
        unweighted = float(loss(self.labels, self.logits))
        # Ones change nothing, per sentence [B] or per token [B, T].
        for ones in (np.ones(3), np.ones((3, 5))):
            self.assertAllClose(
                float(loss(self.labels, self.logits, sample_weight=ones)),
                unweighted,
            )
        # Zeros remove tokens from the sum and the count: a sentence of
        # weight 0 counts as if it were not in the batch.
        kept = [0, 2]
        self.assertAllClose(
            float(
                loss(self.labels, self.logits, sample_weight=[1.0, 0.0, 1.0])
            ),
            reference_loss(self.labels[kept], self.logits[kept], 0.1),
            rtol=1e-5,
        )
        weights = np.random.default_rng(1).uniform(size=(3, 5))
        self.assertAllClose(
            float(loss(self.labels, self.logits, sample_weight=weights)),
            reference_loss(
                self.labels, self.logits, 0.1, token_weights=weights
            ),
            rtol=1e-5,
        )
        with self.assertRaisesRegex(ValueError, "sample_weight.shape="):
            loss(self.labels, self.logits, sample_weight=np.ones((3, 5, 1)))

    def test_a_keras_mask_on_the_logits_weights_tokens(self):
        # E.g. the logits of `ScaledEmbedding(mask_zero=True)` reversed after
        # a decoder: Keras's `Loss.__call__` multiplied the token mean by
        # each unmasked position and summed (the loss ~B * T times too big).
        loss = LabelSmoothedCrossEntropy(0.1)
        mask = np.ones((3, 5), bool)
        mask[1, 2:] = False
        logits = tf.constant(self.logits)
        logits._keras_mask = tf.constant(mask)
        self.assertAllClose(
            float(loss(self.labels, logits)),
            reference_loss(self.labels, self.logits, 0.1, token_weights=mask),
            rtol=1e-5,
        )
        # With sample weights: both.
        per_sentence = np.array([1.0, 0.5, 1.0], "float32")
        self.assertAllClose(
            float(loss(self.labels, logits, sample_weight=per_sentence)),
            reference_loss(
                self.labels,
                self.logits,
                0.1,
                token_weights=mask * per_sentence[:, None],
            ),
            rtol=1e-5,
        )

    def test_labels_with_a_last_axis_of_one_as_in_keras(self):
        # Keras's sparse cross-entropy takes [B, T, 1] labels; this loss
        # failed with a GatherV2 rank error.
        loss = LabelSmoothedCrossEntropy(0.1)
        self.assertAllClose(
            float(loss(self.labels[..., None], self.logits)),
            float(loss(self.labels, self.logits)),
        )
        accuracy = MaskedTokenAccuracy()
        accuracy.update_state(self.labels[..., None], self.logits)
        expected = MaskedTokenAccuracy()
        expected.update_state(self.labels, self.logits)
        self.assertAllClose(accuracy.result(), expected.result())

    def test_labels_that_are_not_the_logits_ids_are_named(self):
        # One-hot labels failed with a GatherV2 rank error, labels of
        # another length with a shape mismatch inside TensorFlow.
        one_hot = tf.one_hot(self.labels, self.logits.shape[-1])
        for labels in (one_hot, self.labels[:, :-1]):
            for function in (
                LabelSmoothedCrossEntropy(0.1),
                MaskedTokenAccuracy().update_state,
            ):
                with self.assertRaisesRegex(
                    ValueError,
                    r"sparse, not one-hot .* Received: y_true.shape="
                    rf"{re.escape(str(tuple(labels.shape)))}",
                ):
                    function(labels, self.logits)

    def test_sample_weights_in_fit_weight_tokens(self):
        # What `model.fit/evaluate(..., sample_weight=[B])` computes: a
        # model whose logits are its inputs, compiled with the loss and the
        # token metrics (Keras weights only `weighted_metrics`).
        logits = keras.Input((5, 11))
        model = keras.Model(logits, keras.layers.Identity()(logits))
        model.compile(
            loss=LabelSmoothedCrossEntropy(0.1),
            weighted_metrics=[MaskedTokenAccuracy(), Perplexity()],
        )

        def evaluate(labels, logits, sample_weight=None):
            return model.evaluate(
                logits, labels, sample_weight=sample_weight, verbose=0
            )

        unweighted = evaluate(self.labels, self.logits)
        self.assertAllClose(
            evaluate(self.labels, self.logits, np.ones(3)),
            unweighted,
            rtol=1e-6,
        )
        kept = [0, 2]
        self.assertAllClose(
            evaluate(self.labels, self.logits, np.array([1.0, 0.0, 1.0])),
            evaluate(self.labels[kept], self.logits[kept]),
            rtol=1e-6,
        )

    def test_bad_smoothing(self):
        for value in (1.0, -0.1, "0.1", True):
            with self.assertRaisesRegex(
                ValueError, f"label_smoothing={value!r}"
            ):
                LabelSmoothedCrossEntropy(value)

    def test_a_pad_id_that_is_not_an_integer_is_named(self):
        for make in (
            LabelSmoothedCrossEntropy,
            MaskedTokenAccuracy,
            Perplexity,
            TargetTokenCount,
        ):
            for value in ("0", 0.0, None):
                with self.assertRaisesRegex(ValueError, f"pad_id={value!r}"):
                    make(pad_id=value)
            # A NumPy integer is stored as an int, so the config is JSON.
            config = make(pad_id=np.int64(5)).get_config()
            self.assertIs(type(config["pad_id"]), int)
            json.dumps(config)

    def test_pad_id_is_the_id_ignored(self):
        labels = np.where(self.labels == 0, 5, self.labels)  # 5 pads here
        loss = LabelSmoothedCrossEntropy(0.1, pad_id=5)(labels, self.logits)
        self.assertAllClose(
            loss, reference_loss(labels, self.logits, 0.1, pad_id=5), atol=1e-6
        )

    def test_a_batch_without_real_tokens_has_a_zero_loss(self):
        # Its sum over no tokens is divided by 1, not 0 (NaN): with sample
        # weights of 0, or labels all padding (e.g. a replica's share).
        loss = LabelSmoothedCrossEntropy(0.1)
        logits = tf.constant(self.logits)
        for labels, weights in (
            (np.zeros_like(self.labels), None),
            (self.labels, np.zeros(3, "float32")),
        ):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                value = loss(labels, logits, sample_weight=weights)
            self.assertEqual(float(value), 0.0)
            self.assertAllEqual(
                tape.gradient(value, logits), np.zeros_like(self.logits)
            )

    def test_config_round_trip(self):
        for loss in (
            LabelSmoothedCrossEntropy(0.2),
            LabelSmoothedCrossEntropy(0.2, reduction="none"),
            LabelSmoothedCrossEntropy(0.2, pad_id=5, name="smoothed"),
        ):
            self.assertEqual(
                LabelSmoothedCrossEntropy.from_config(
                    loss.get_config()
                ).get_config(),
                loss.get_config(),
            )
        revived = LabelSmoothedCrossEntropy.from_config(
            LabelSmoothedCrossEntropy(0.2, pad_id=5).get_config()
        )
        self.assertEqual((revived.pad_id, revived.label_smoothing), (5, 0.2))

    def test_reduction_none_gives_the_weighted_per_token_losses(self):
        # `reduction` used to be dropped: "none" returned the mean, and
        # `loss.reduction` said "sum".
        mean = LabelSmoothedCrossEntropy(0.1)
        self.assertEqual(mean.reduction, "mean_with_sample_weight")
        weights = (
            np.random.default_rng(1).uniform(size=(3, 5)).astype("float32")
        )
        for reduction in ("none", None):
            loss = LabelSmoothedCrossEntropy(0.1, reduction=reduction)
            self.assertEqual(loss.get_config()["reduction"], reduction)
            per_token = loss(self.labels, self.logits, sample_weight=weights)
            token_weights = (self.labels != 0) * weights
            self.assertAllClose(
                per_token,
                reference_token_losses(self.labels, self.logits, 0.1)
                * token_weights,
                rtol=1e-5,
            )
            # Their weighted mean is the default reduction's value.
            self.assertAllClose(
                np.sum(per_token) / token_weights.sum(),
                mean(self.labels, self.logits, sample_weight=weights),
                rtol=1e-5,
            )

    def test_other_reductions_are_refused(self):
        # Keras's "sum_over_batch_size" would divide by padding too.
        for reduction in ("sum", "sum_over_batch_size", "mean"):
            with self.assertRaisesRegex(
                ValueError,
                f'"none" .*Received: reduction={reduction!r}',
            ):
                LabelSmoothedCrossEntropy(0.1, reduction=reduction)


class MetricsTest(TestCase):
    def test_target_token_count_skips_its_pad_id(self):
        labels = np.array([[7, 5, 0, 5]], "int32")
        count = TargetTokenCount(pad_id=5)
        count.update_state(labels, np.zeros((1, 4, 8), "float32"))
        self.assertEqual(float(count.result()), 2.0)

    def test_accuracy_counts_real_tokens_only(self):
        labels = np.array([[1, 2, 0, 0]], "int32")
        logits = np.zeros((1, 4, 3), "float32")
        logits[0, 0, 1] = 5  # right
        logits[0, 1, 1] = 5  # wrong
        logits[0, 2, 0] = 5  # padding "right": must not count
        metric = MaskedTokenAccuracy()
        metric.update_state(labels, logits)
        self.assertAllClose(float(metric.result()), 0.5)

    def test_a_keras_mask_on_the_logits_removes_tokens(self):
        # As the loss does, and Keras's own metrics: a masked position
        # counted in accuracy and perplexity before.
        rng = np.random.default_rng(3)
        logits = rng.normal(size=(3, 4, 5)).astype("float32")
        labels = rng.integers(1, 5, size=(3, 4)).astype("int32")
        mask = np.ones((3, 4), bool)
        mask[1, 2:] = False
        masked = tf.constant(logits)
        masked._keras_mask = tf.constant(mask)
        for metric in (MaskedTokenAccuracy(), Perplexity()):
            expected = metric(
                labels, logits, sample_weight=mask.astype("float32")
            )
            metric.reset_state()
            self.assertAllClose(metric(labels, masked), expected)
            metric.reset_state()
            unmasked = metric(labels, logits)
            self.assertNotAllClose(expected, unmasked)

    def test_no_real_tokens_make_an_accuracy_of_0_and_a_perplexity_of_1(self):
        # Not 0 / 0 (NaN): before any update (an epoch's logs are read
        # after a reset), and after a batch of padding only.
        labels = np.zeros((2, 3), "int32")
        logits = np.zeros((2, 3, 5), "float32")
        for metric, empty in (
            (MaskedTokenAccuracy(), 0.0),
            (Perplexity(), 1.0),
        ):
            self.assertEqual(float(metric.result()), empty)
            metric.update_state(labels, logits)
            self.assertEqual(float(metric.result()), empty)

    def test_perplexity_is_exp_of_mean_nll(self):
        rng = np.random.default_rng(1)
        logits = rng.normal(size=(2, 3, 5)).astype("float32")
        labels = np.array([[1, 2, 0], [3, 4, 1]], "int32")
        metric = Perplexity()
        metric.update_state(labels, logits)
        self.assertAllClose(
            float(metric.result()),
            np.exp(reference_loss(labels, logits, 0.0)),
            rtol=1e-5,
        )

    def test_sample_weights_weight_tokens(self):
        rng = np.random.default_rng(2)
        logits = rng.normal(size=(3, 4, 5)).astype("float32")
        labels = rng.integers(1, 5, size=(3, 4)).astype("int32")
        labels[1, 2:] = 0
        for metric in (MaskedTokenAccuracy(), Perplexity()):
            unweighted = metric(labels, logits)
            for ones in (np.ones(3), np.ones((3, 4))):
                metric.reset_state()
                self.assertAllClose(
                    metric(labels, logits, sample_weight=ones), unweighted
                )
            # Sentence 1 removed, with per-sentence or per-token zeros.
            kept = [0, 2]
            metric.reset_state()
            expected = metric(labels[kept], logits[kept])
            for zeros in (
                [1.0, 0.0, 1.0],
                np.array([[1.0], [0.0], [1.0]]) * np.ones(4),
            ):
                metric.reset_state()
                self.assertAllClose(
                    metric(labels, logits, sample_weight=zeros), expected
                )
