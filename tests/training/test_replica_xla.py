"""Tests of the per-replica XLA training step (`training/replica_xla.py`)."""

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import build_transformer
from keras_transformer.training import metrics, replica_xla, trainer
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from tests.test_case import TestCase
from tests.training.test_trainer import global_batch, tiny_config


def deterministic_tiny_config():
    # Without dropout, so that the two steps compared see the same model.
    return tiny_config(
        d_model=16, d_ff=32, num_heads=2, dropout=0.0, attention_dropout=0.0
    )


class ReplicaXlaTest(TestCase):
    def test_weighted_step_equals_the_keras_step(self):
        # The per-replica step (here on one device) weights tokens as
        # `LabelSmoothedCrossEntropy` does in Keras's own step: the same
        # update and loss, with sentence and token weights alike.
        config = deterministic_tiny_config()
        features, labels = global_batch(batch_size=6, length=7)
        keras.utils.set_random_seed(3)
        models = [build_transformer(config) for _ in range(2)]
        models[1].set_weights(models[0].get_weights())
        initial = models[0].get_weights()
        sentence_weights = np.array([1.0, 0.0, 2.0, 1.0, 0.5, 0.0], "float32")
        for weights in (
            sentence_weights,
            np.tile(sentence_weights[:, None], [1, 7]),
        ):
            results = []
            for model, replica_path in zip(models, (False, True)):
                model.set_weights(initial)
                compile_with_sgd(model)
                model.replica_jit_compile = replica_path
                logs = model.train_on_batch(
                    features, labels, sample_weight=weights, return_dict=True
                )
                results.append((logs["loss"], model.get_weights()))
            (keras_loss, keras_weights), (replica_loss, replica_weights) = (
                results
            )
            self.assertAllClose(replica_loss, keras_loss, atol=1e-5)
            for got, want in zip(replica_weights, keras_weights):
                self.assertAllClose(got, want, atol=1e-5)
            # The weights count: zero-weight sentences change the loss.
            unweighted = models[0]
            unweighted.set_weights(initial)
            trainer.compile_for_training(
                unweighted, warmup_steps=10, jit_compile=False
            )
            loss = unweighted.evaluate(
                features, labels, verbose=0, return_dict=True
            )
            self.assertNotAllClose(loss["loss"], keras_loss)

    def test_weighted_metrics_get_the_sample_weights_as_in_the_keras_step(
        self,
    ):
        config = deterministic_tiny_config()
        features, labels = global_batch(batch_size=6, length=7)
        weights = np.array([1.0, 0.0, 2.0, 1.0, 0.5, 0.0], "float32")
        keras.utils.set_random_seed(3)
        initial = build_transformer(config).get_weights()
        logs = []
        for replica_path in (False, True):
            model = build_transformer(config)
            model.set_weights(initial)
            compile_with_sgd(model)
            # `fit` passes its sample weights to `weighted_metrics` only.
            model.compile(
                optimizer=model.optimizer,
                loss=model.loss,
                metrics=[metrics.Perplexity()],
                weighted_metrics=[
                    metrics.Perplexity(name="weighted_perplexity")
                ],
                jit_compile=False,
            )
            model.replica_jit_compile = replica_path
            logs.append(
                model.train_on_batch(
                    features, labels, sample_weight=weights, return_dict=True
                )
            )
        keras_logs, replica_logs = logs
        for name in ("perplexity", "weighted_perplexity"):
            self.assertAllClose(replica_logs[name], keras_logs[name], rtol=1e-5)
        self.assertNotAllClose(
            keras_logs["weighted_perplexity"],
            keras_logs["perplexity"],
            rtol=1e-3,
        )

    def test_the_forward_and_backward_pass_is_one_xla_cluster(self):
        model = trainer.compile_for_training(
            build_transformer(deterministic_tiny_config()),
            warmup_steps=10,
            jit_compile=False,
        )
        features, labels = global_batch(batch_size=4, length=6)

        def must_compile(replica_jit_compile):
            model.replica_jit_compile = replica_jit_compile
            step = tf.function(
                lambda x, y: replica_xla.loss_sum_and_gradients(model)(
                    x, y, None
                )[0]
            )
            graph = step.get_concrete_function(features, labels).graph
            return [
                op.node_def.attr["_XlaMustCompile"].b
                for op in graph.get_operations()
                if op.type.endswith("PartitionedCall")
            ]

        self.assertEqual(must_compile(True), [True])
        self.assertNotIn(True, must_compile(False))

    def test_other_losses_are_refused(self):
        model = build_transformer(deterministic_tiny_config())
        model.compile(
            optimizer="sgd",
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        with self.assertRaisesRegex(
            TypeError,
            "compiled with LabelSmoothedCrossEntropy. "
            "Received: loss=SparseCategoricalCrossentropy$",
        ):
            replica_xla.loss_sum_and_gradients(model)

    def test_loss_sum_is_the_compiled_loss(self):
        # The per-replica step sums what the model's loss weighs: its own
        # pad_id, and [B, T, 1] labels as Keras's sparse losses take them.
        config = deterministic_tiny_config()
        keras.utils.set_random_seed(4)
        model = build_transformer(config)
        loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=5)
        model.compile(optimizer=keras.optimizers.SGD(1.0), loss=loss_fn)
        features, labels = global_batch(batch_size=4, length=6)
        labels[:, 1] = 5  # ignored; the 0s count here
        labels = labels[..., None]  # [B, T, 1]
        total, num_tokens, logits, gradients = (
            replica_xla.loss_sum_and_gradients(model)(features, labels, None)
        )
        self.assertEqual(float(num_tokens), float(np.sum(labels != 5)))
        with tf.GradientTape() as tape:
            expected = loss_fn(labels, model(features, training=True))
        self.assertAllClose(total / num_tokens, expected, atol=1e-6)
        expected_gradients = tape.gradient(expected, model.trainable_weights)
        for got, want in zip(gradients, expected_gradients):
            self.assertAllClose(got / num_tokens, want, atol=1e-6)


def compile_with_sgd(model):
    """`compile_for_training` with plain SGD, whose update shows the
    gradient as it is."""
    trainer.compile_for_training(
        model,
        warmup_steps=10,
        jit_compile=False,
        optimizer=keras.optimizers.SGD(1.0),
    )
