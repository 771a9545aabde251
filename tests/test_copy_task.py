"""End-to-end: a tiny Transformer learns to reverse sequences with fit."""

import numpy as np
import pytest

from keras_transformer import TransformerConfig, build_transformer, tokens
from keras_transformer.training import (
    LabelSmoothedCrossEntropy,
    MaskedTokenAccuracy,
    transformer_optimizer,
)
from tests.test_case import TestCase

VOCAB_SIZE = 16


def reverse_task(num_examples, seed):
    """Source: random tokens + EOS; target: the tokens reversed.

    Lengths vary, so batches carry padding that the model must ignore.
    """
    rng = np.random.default_rng(seed)
    length = 8
    source = np.zeros((num_examples, length + 1), "int32")
    target_in = np.zeros((num_examples, length + 1), "int32")
    labels = np.zeros((num_examples, length + 1), "int32")
    for i in range(num_examples):
        n = rng.integers(3, length + 1)
        sequence = rng.integers(tokens.NUM_SPECIAL_TOKENS, VOCAB_SIZE, n)
        source[i, : n + 1] = [*sequence, tokens.EOS_ID]
        reversed_sequence = sequence[::-1]
        target_in[i, : n + 1] = [tokens.BOS_ID, *reversed_sequence]
        labels[i, : n + 1] = [*reversed_sequence, tokens.EOS_ID]
    return {"source_ids": source, "target_ids": target_in}, labels


class ReverseTaskTest(TestCase):
    @pytest.mark.slow
    def test_tiny_model_learns_to_reverse(self):
        config = TransformerConfig.preset(
            "tiny",
            vocab_size=VOCAB_SIZE,
            d_model=64,
            d_ff=128,
            num_heads=4,
            num_layers=2,
            dropout=0.0,
            label_smoothing=0.1,
        )
        model = build_transformer(config)
        model.compile(
            # Half the schedule: at d_model 64 its full peak (6e-3) makes the
            # accuracy swing by a few points from epoch to epoch, so a 0.99
            # threshold would pass or fail on float rounding alone.
            optimizer=transformer_optimizer(
                config.d_model, warmup_steps=400, scale=0.5
            ),
            loss=LabelSmoothedCrossEntropy(config.label_smoothing),
            metrics=[MaskedTokenAccuracy()],
        )
        features, labels = reverse_task(8192, seed=0)
        model.fit(features, labels, batch_size=64, epochs=8, verbose=0)
        test_features, test_labels = reverse_task(512, seed=1)
        results = model.evaluate(
            test_features, test_labels, return_dict=True, verbose=0
        )
        self.assertGreaterEqual(results["token_accuracy"], 0.99)
