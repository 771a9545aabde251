"""Tests of greedy decoding with canned logits (no model)."""

import numpy as np
import tensorflow as tf

from keras_transformer.decoding import greedy_search
from keras_transformer.tokens import BOS_ID, EOS_ID
from tests.decoding.test_beam_search import PrefixTable
from tests.test_case import TestCase


def reference_greedy(model, sentence, limit, eos_id=EOS_ID):
    """Step-by-step arg-max in NumPy: (tokens, log-prob)."""
    tokens, log_prob = [], 0.0
    while len(tokens) < limit:
        log_probs = model.log_probs(sentence, tokens)
        token = int(np.argmax(log_probs))
        tokens.append(token)
        log_prob += log_probs[token]
        if token == eos_id:
            break
    return tokens, log_prob


class GreedySearchTest(TestCase):
    def test_matches_step_by_step_argmax(self):
        model = PrefixTable(4, max_length=5, seed=25, eos_bias=[2, 1, 0, 1])
        limits = [5, 2, 4, 5]
        result = greedy_search(model.logits_fn, *model.inputs(), limits)
        self.assertEqual(result.ids.shape, (4, 5))
        for sentence, limit in enumerate(limits):
            tokens, log_prob = reference_greedy(model, sentence, limit)
            self.assertEqual(result.lengths[sentence], len(tokens))
            self.assertAllEqual(
                result.ids[sentence], tokens + [0] * (5 - len(tokens))
            )
            self.assertAllClose(result.log_probs[sentence], log_prob)
        lengths = result.lengths.numpy()
        self.assertGreater(len(set(lengths)), 1, "fixture: EOS varies")
        # The loop ends with the longest sentence, not at max(limits).
        self.assertEqual(model.calls, lengths.max())
        self.assertLess(model.calls, max(limits), "fixture: all end early")

    def test_runs_to_limits_without_eos(self):
        model = PrefixTable(3, max_length=5, seed=22, eos_bias=5.0)
        limits = [3, 5, 1]
        result = greedy_search(
            model.logits_fn, *model.inputs(), limits, eos_id=-1
        )
        self.assertEqual(model.calls, 5)
        self.assertAllEqual(result.lengths, limits)
        for sentence, limit in enumerate(limits):
            tokens, _ = reference_greedy(model, sentence, limit, eos_id=-1)
            self.assertAllEqual(result.ids[sentence, :limit], tokens)
            self.assertFalse(np.any(result.ids[sentence, limit:]))

    def test_limit_zero_generates_nothing(self):
        model = PrefixTable(2, max_length=3, seed=23, eos_bias=-9.0)
        result = greedy_search(model.logits_fn, *model.inputs(), [0, 3])
        self.assertAllEqual(result.lengths, [0, 3])
        self.assertFalse(np.any(result.ids[0]))
        self.assertAllClose(result.log_probs[0], 0.0)

    def test_jit_compile_and_serving_signature_match_eager(self):
        model = PrefixTable(3, max_length=5, seed=24, eos_bias=[1, 0, -1])
        limits = tf.constant([5, 3, 4])
        expected = greedy_search(model.logits_fn, *model.inputs(), limits)

        def search(sentences, limits):
            return greedy_search(
                model.logits_fn, *model.inputs(sentences), limits
            )

        compiled = tf.function(search, jit_compile=True)
        exported = tf.function(
            search,
            autograph=False,
            input_signature=[tf.TensorSpec([None], tf.int32)] * 2,
        )
        for fn in (compiled, exported):
            result = fn(tf.range(3), limits)
            self.assertAllEqual(result.ids, expected.ids)
            self.assertAllEqual(result.lengths, expected.lengths)
            self.assertAllClose(result.log_probs, expected.log_probs)

    def test_growing_state_in_a_serving_signature(self):
        model = PrefixTable(3, max_length=5, seed=24, eos_bias=[1, 0, -1])
        limits = tf.constant([5, 3, 4])
        expected = greedy_search(model.logits_fn, *model.inputs(), limits)

        @tf.function(
            autograph=False,
            input_signature=[tf.TensorSpec([None], tf.int32)] * 2,
        )
        def search(sentences, limits):
            return greedy_search(
                model.growing_logits_fn,
                *model.growing_inputs(sentences),
                limits,
                state_shape_invariants={
                    "history": tf.TensorShape([None, None])
                },
            )

        result = search(tf.range(3), limits)
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllClose(result.log_probs, expected.log_probs)

    def test_logits_of_wrong_rank_fail(self):
        def logits_fn(ids, step, state, static):
            del step, static  # Unused.
            return tf.zeros([tf.shape(ids)[0], 1, 6]), state

        with self.assertRaisesRegex(
            ValueError,
            r"must return logits of shape \[rows, vocab_size\] for the "
            r"current position only. Received: logits.shape=\(2, 1, 6\)",
        ):
            greedy_search(logits_fn, tf.constant([2, 2]), {}, {}, 3)

    def test_bad_initial_ids_and_limits_fail(self):
        model = PrefixTable(2, max_length=3, seed=0)
        _, state, static = model.inputs()
        for initial_ids, limits, message in (
            (
                tf.fill([2, 1], BOS_ID),
                3,
                r"`initial_ids` must be a \[batch\] vector.*"
                r"Received: initial_ids.shape=\(2, 1\)",
            ),
            (
                tf.fill([2], BOS_ID),
                [3, 3, 3],
                "`max_decode_length` must be a scalar or have one limit per "
                r"sentence. Received: max_decode_length.shape=\(3,\), "
                "batch_size=2",
            ),
        ):
            with self.assertRaisesRegex(ValueError, message):
                greedy_search(
                    model.logits_fn, initial_ids, state, static, limits
                )
        # A cast error from inside TensorFlow before.
        with self.assertRaisesRegex(
            TypeError,
            "^`max_decode_length` must be an integer or a tensor of integers. "
            "Received: max_decode_length='3'$",
        ):
            greedy_search(
                model.logits_fn, tf.fill([2], BOS_ID), state, static, "3"
            )
