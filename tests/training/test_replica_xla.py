"""Tests of the per-replica XLA training step (`training/replica_xla.py`)."""

import keras
import numpy as np

from keras_transformer import TransformerConfig, build_transformer
from keras_transformer.training import trainer
from tests.test_case import TestCase
from tests.training.test_trainer import VOCAB, global_batch


class ReplicaXlaTest(TestCase):
    def test_weighted_step_equals_the_keras_step(self):
        # The per-replica step (here on one device) weights tokens as
        # `LabelSmoothedCrossEntropy` does in Keras's own step: the same
        # update and loss, with sentence and token weights alike.
        config = TransformerConfig.preset(
            "tiny",
            vocab_size=VOCAB,
            num_layers=1,
            d_model=16,
            d_ff=32,
            num_heads=2,
            dropout=0.0,
            attention_dropout=0.0,
        )
        features, labels = global_batch(batch_size=6, length=7)
        keras.utils.set_random_seed(3)
        models = [build_transformer(config) for _ in range(2)]
        models[1].set_weights(models[0].get_weights())
        initial = models[0].get_weights()
        sentence_weights = np.array([1.0, 0.0, 2.0, 1.0, 0.5, 0.0], "float32")
        for weights in (sentence_weights, np.tile(sentence_weights[:, None], [1, 7])):
            results = []
            for model, replica_path in zip(models, (False, True)):
                model.set_weights(initial)
                trainer.compile_for_training(
                    model,
                    warmup_steps=10,
                    jit_compile=False,
                    optimizer=keras.optimizers.SGD(1.0),
                )
                model.replica_jit_compile = replica_path
                logs = model.train_on_batch(
                    features, labels, sample_weight=weights, return_dict=True
                )
                results.append((logs["loss"], model.get_weights()))
            (keras_loss, keras_weights), (replica_loss, replica_weights) = results
            self.assertAllClose(replica_loss, keras_loss, atol=1e-5)
            for got, want in zip(replica_weights, keras_weights):
                self.assertAllClose(got, want, atol=1e-5)
            # The weights count: zero-weight sentences change the loss.
            unweighted = models[0]
            unweighted.set_weights(initial)
            trainer.compile_for_training(unweighted, warmup_steps=10, jit_compile=False)
            loss = unweighted.evaluate(features, labels, verbose=0, return_dict=True)
            self.assertNotAllClose(loss["loss"], keras_loss)
