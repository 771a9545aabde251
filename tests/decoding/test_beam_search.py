"""Tests of beam search with canned logits (no model)."""

import itertools
import re

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from keras_transformer.decoding import (
    beam_search,
    greedy_search,
    length_penalty,
    max_alpha,
)
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID
from tests.test_case import TestCase


def penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


class PrefixTable:
    """Canned logits indexed by (sentence, whole prefix): a known score table.

    The prefix is read from the state (a token history the search gathers by
    beam origin), never from `ids` alone, so a wrongly gathered state changes
    the logits. PAD and BOS get -inf logits: never generated.
    """

    def __init__(self, batch_size, max_length, seed, eos_bias=0.0):
        self.vocab_size = 6
        self.max_length = max_length
        self.batch_size = batch_size
        self.calls = 0  # counted when run eagerly
        base = self.vocab_size + 1
        rng = np.random.default_rng(seed)
        table = 2.0 * rng.standard_normal(
            (batch_size, base**max_length, self.vocab_size)
        )
        table[:, :, EOS_ID] += np.broadcast_to(eos_bias, [batch_size])[:, None]
        table[:, :, [PAD_ID, BOS_ID]] = -np.inf
        self.table = table
        self.tf_table = tf.constant(table, tf.float32)
        self.powers = tf.constant(base ** np.arange(max_length), tf.int32)

    def code(self, prefix):
        base = self.vocab_size + 1
        return sum((token + 1) * base**i for i, token in enumerate(prefix))

    def log_probs(self, sentence, tokens):
        """float64 log-softmax of the next token after BOS + tokens."""
        logits = self.table[sentence, self.code([BOS_ID, *tokens])]
        finite = logits[np.isfinite(logits)]
        top = finite.max()
        return logits - top - np.log(np.exp(finite - top).sum())

    def inputs(self, sentences=None):
        """(initial_ids, state, static) for a subset of the sentences."""
        sentences = (
            np.arange(self.batch_size) if sentences is None else sentences
        )
        sentences = tf.cast(sentences, tf.int32)
        batch = tf.shape(sentences)[0]
        state = {"history": tf.zeros([batch, self.max_length], tf.int32)}
        return tf.fill([batch], BOS_ID), state, {"sentence": sentences}

    def logits_fn(self, ids, step, state, static):
        self.calls += 1
        column = tf.one_hot(step, self.max_length, dtype=tf.int32)
        history = state["history"] + ids[:, None] * column
        seen = tf.range(self.max_length) <= step
        weights = tf.where(seen, self.powers, 0)
        code = tf.reduce_sum((history + 1) * weights, axis=1)
        index = tf.stack([static["sentence"], code], axis=1)
        return tf.gather_nd(self.tf_table, index), {"history": history}

    def growing_inputs(self, sentences=None):
        """`inputs` for `growing_logits_fn`: an empty history that grows."""
        ids, state, static = self.inputs(sentences)
        return ids, {"history": state["history"][:, :0]}, static

    def growing_logits_fn(self, ids, step, state, static):
        """`logits_fn` with a history that grows by a column per step and
        untiled static tensors (`tile_static=False`)."""
        history = tf.concat([state["history"], ids[:, None]], axis=1)
        beams = tf.shape(ids)[0] // tf.shape(static["sentence"])[0]
        padded = tf.pad(history, [[0, 0], [0, self.max_length - step - 1]])
        logits, _ = self.logits_fn(
            ids,
            step,
            {
                "history": padded
                * tf.cast(tf.range(self.max_length) < step, tf.int32)
            },
            {"sentence": tf.repeat(static["sentence"], beams)},
        )
        return logits, {"history": history}

    def in_place_inputs(self, beam_size):
        """`inputs` for `in_place_logits_fn`, made for the B * K hypotheses
        (`tile_state=False`)."""
        ids, _, static = self.inputs()
        zeros = tf.zeros(
            [self.batch_size * beam_size, self.max_length], tf.int32
        )
        return ids, {"tokens": zeros, "ancestry": zeros}, static

    def in_place_logits_fn(self, ids, step, state, static):
        """`logits_fn` as in-place decoder caches work: each step's tokens
        stay in the slot (row) that wrote them, and a hypothesis reads its
        history through its ancestry, the slot of each earlier position."""
        slots = tf.range(tf.shape(ids)[0])[:, None]
        column = tf.one_hot(
            step, self.max_length, on_value=True, off_value=False
        )
        tokens = tf.where(column, ids[:, None], state["tokens"])
        ancestry = tf.where(column, slots, state["ancestry"])
        positions = tf.broadcast_to(
            tf.range(self.max_length), tf.shape(ancestry)
        )
        history = tf.gather_nd(tokens, tf.stack([ancestry, positions], axis=-1))
        earlier = tf.range(self.max_length) < step
        logits, _ = self.logits_fn(
            ids, step, {"history": tf.where(earlier, history, 0)}, static
        )
        return logits, {"tokens": tokens, "ancestry": ancestry}

    @staticmethod
    def reorder_ancestry(state, rows):
        """`reorder_state` for `in_place_logits_fn`: the tokens stay."""
        return dict(state, ancestry=tf.gather(state["ancestry"], rows))

    def exhaustive(self, sentence, limit, alpha, num_return):
        """Top hypotheses over every sequence that ends (EOS or limit)."""
        ended = []

        def grow(tokens, log_prob):
            for token, token_log_prob in enumerate(
                self.log_probs(sentence, tokens)
            ):
                if not np.isfinite(token_log_prob):
                    continue
                seq = [*tokens, token]
                total = log_prob + token_log_prob
                if token == EOS_ID or len(seq) == limit:
                    ended.append((total / penalty(len(seq), alpha), seq))
                else:
                    grow(seq, total)

        if limit > 0:
            grow([], 0.0)
        return sorted(ended, key=lambda item: -item[0])[:num_return]


class BeamSearchTest(TestCase):
    def search(self, model, limits, **kwargs):
        return beam_search(
            model.logits_fn,
            *model.inputs(),
            vocab_size=model.vocab_size,
            max_decode_length=limits,
            **kwargs,
        )

    def assert_hypotheses(self, result, model, limits, alpha, eos_id=EOS_ID):
        """Scores are penalised log-prob sums; nothing grows after the end."""
        ids, scores, lengths = (x.numpy() for x in result)
        for sentence, slot in itertools.product(*map(range, lengths.shape)):
            length = lengths[sentence, slot]
            tokens = ids[sentence, slot, :length].tolist()
            self.assertFalse(np.any(ids[sentence, slot, length:]))
            self.assertNotIn(eos_id, tokens[:-1])
            if length < limits[sentence]:
                self.assertEqual(tokens[-1], eos_id)
            log_prob = sum(
                model.log_probs(sentence, tokens[:i])[token]
                for i, token in enumerate(tokens)
            )
            self.assertAllClose(
                scores[sentence, slot],
                log_prob / penalty(length, alpha),
                rtol=1e-5,
                atol=1e-5,
            )
        self.assertAllEqual(np.sort(scores)[:, ::-1], scores)

    @parameterized.product(alpha=[0.0, 0.6, 2.0], num_return=[1, 4])
    def test_equals_exhaustive_search(self, alpha, num_return):
        # 3 tokens keep a hypothesis alive (UNK and two words), so before the
        # last step there are at most 4 * 3 ** (limit - 2) extensions: a beam
        # that holds them all must give the exact top n.
        model = PrefixTable(3, max_length=4, seed=7, eos_bias=[2.0, 0.0, -2.0])
        limits = [4, 2, 3]
        result = self.search(
            model, limits, beam_size=36, alpha=alpha, num_return=num_return
        )
        self.assertEqual(result.ids.shape, (3, num_return, 4))
        for sentence, limit in enumerate(limits):
            expected = model.exhaustive(sentence, limit, alpha, num_return)
            self.assertAllClose(
                result.scores[sentence], [score for score, _ in expected]
            )
            for slot, (_, tokens) in enumerate(expected):
                length = len(tokens)
                self.assertEqual(result.lengths[sentence, slot], length)
                self.assertAllEqual(
                    result.ids[sentence, slot], tokens + [0] * (4 - length)
                )
        best_lengths = result.lengths[:, 0].numpy()
        self.assertGreater(len(set(best_lengths)), 1, "fixture: EOS varies")
        self.assert_hypotheses(result, model, limits, alpha)

    @parameterized.named_parameters(
        ("paper", 4, 0.6, 2), ("wide", 6, 1.0, 3), ("no_penalty", 3, 0.0, 3)
    )
    def test_scores_are_penalised_log_probs(self, beam_size, alpha, n):
        model = PrefixTable(4, max_length=5, seed=3, eos_bias=[1, 0, -1, -3])
        limits = [5, 3, 4, 5]
        result = self.search(
            model, limits, beam_size=beam_size, alpha=alpha, num_return=n
        )
        self.assert_hypotheses(result, model, limits, alpha)

    def test_num_needed_stops_once_those_hypotheses_are_final(self):
        # A request for fewer hypotheses than the graph's N (TF Serving's
        # `translate_with_options`) waited for all N to be final.
        model = PrefixTable(4, max_length=5, seed=5, eos_bias=[2, 2, 1, 1])
        steps = tf.Variable(0)

        def counted_logits_fn(*args):
            steps.assign_add(1)
            return model.logits_fn(*args)

        @tf.function(autograph=False)
        def traced(num_needed):
            return beam_search(
                counted_logits_fn,
                *model.inputs(),
                vocab_size=model.vocab_size,
                max_decode_length=5,
                beam_size=4,
                num_return=4,
                num_needed=num_needed,
            )

        def search(num_needed=None):
            steps.assign(0)
            return traced(num_needed), int(steps.numpy())

        full, full_steps = search()
        needed_steps = []
        for n in (1, 2, 3):  # A tensor: one trace.
            result, result_steps = search(num_needed=tf.constant(n))
            self.assertAllEqual(result.ids[:, :n], full.ids[:, :n])
            self.assertAllEqual(result.scores[:, :n], full.scores[:, :n])
            needed_steps.append(result_steps)
        self.assertAllEqual(sorted(needed_steps), needed_steps)
        self.assertLess(needed_steps[0], full_steps, "fixture: stops early")
        self.assertLessEqual(needed_steps[-1], full_steps)
        with self.assertRaisesRegex(ValueError, "num_needed=5, num_return=4"):
            search(num_needed=5)

    def test_alpha_tensor(self):
        model = PrefixTable(2, max_length=4, seed=1)
        expected = self.search(model, 4, beam_size=3, alpha=1.2, num_return=2)
        result = self.search(
            model, 4, beam_size=3, alpha=tf.constant(1.2), num_return=2
        )
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllClose(result.scores, expected.scores)

    def test_static_that_is_not_per_sentence_says_to_pass_tile_static_false(
        self,
    ):
        # Transformer.initial_decoding_state's step constants hold weights
        # and may hold None: tf.repeat failed on the None, and a weight
        # repeated for the beams in the step's matmul.
        def logits_fn(ids, step, state, static):
            del step, static  # Unused.
            return tf.one_hot(ids, 6), state

        ids = tf.fill([2], BOS_ID)
        for static, shape in (
            ({"mask": tf.ones([2, 3]), "bias": None}, "None"),
            ({"mask": tf.ones([2, 3]), "kernel": tf.ones([8, 8])}, r"\(8, 8\)"),
            (tf.constant(1.0), r"\(\)"),
        ):
            with self.assertRaisesRegex(
                ValueError,
                "With tile_static=True every tensor of `static` is a "
                r"\[B, \.\.\.\] tensor.*Pass tile_static=False.*Received: a "
                f"static entry of shape {shape}, batch size 2$",
            ):
                beam_search(logits_fn, ids, {}, static, 6, 2, 3)
            beam_search(logits_fn, ids, {}, static, 6, 2, 3, tile_static=False)

    @parameterized.parameters(11, 12, 13)
    def test_beam_size_one_equals_greedy(self, seed):
        # With alpha = 0 both maximise log P step by step: same choices.
        model = PrefixTable(3, max_length=5, seed=seed, eos_bias=[1, 0, -1])
        limits = [5, 4, 2]
        beam = self.search(model, limits, beam_size=1, alpha=0.0)
        greedy = greedy_search(model.logits_fn, *model.inputs(), limits)
        self.assertAllEqual(beam.ids[:, 0], greedy.ids)
        self.assertAllEqual(beam.lengths[:, 0], greedy.lengths)
        self.assertAllClose(beam.scores[:, 0], greedy.log_probs)

    def test_stops_at_per_sentence_limits_without_eos(self):
        model = PrefixTable(3, max_length=5, seed=2)
        limits = [2, 5, 3]
        result = self.search(
            model, limits, beam_size=4, eos_id=-1, num_return=4
        )
        self.assertEqual(model.calls, 5)  # exactly max(limits) steps
        self.assertAllEqual(result.lengths, np.repeat([limits], 4, 0).T)
        for sentence, limit in enumerate(limits):
            self.assertFalse(np.any(result.ids[sentence, :, limit:]))
            self.assertTrue(np.all(result.ids[sentence, :, :limit] != PAD_ID))
        self.assert_hypotheses(result, model, limits, 0.6, eos_id=-1)

    def test_early_stop_per_sentence(self):
        # Sentence 0 almost surely says EOS first, sentence 1 never can.
        model = PrefixTable(2, max_length=6, seed=4, eos_bias=[30.0, -np.inf])
        result = self.search(model, 6, beam_size=2)
        self.assertEqual(model.calls, 6)
        self.assertAllEqual(result.lengths[:, 0], [1, 6])
        self.assertAllEqual(result.ids[0, 0], [EOS_ID, 0, 0, 0, 0, 0])

        # The finished sentence no longer changed while sentence 1 went on.
        alone = PrefixTable(2, max_length=6, seed=4, eos_bias=[30.0, -np.inf])
        solo = beam_search(
            alone.logits_fn, *alone.inputs([0]), 6, 2, max_decode_length=6
        )
        self.assertEqual(alone.calls, 1)  # provably done after one step
        self.assertAllClose(solo.scores[0], result.scores[0])

    def test_early_stop_waits_for_reachable_penalties(self):
        # EOS first (p 0.9) scores log 0.9 = -0.105 at once; the other path
        # is far less likely (0.1) but, with alpha 4, its length penalty at
        # the limit of 10 is 39: log(0.1 * 0.999 ** 9) / 39 = -0.059 wins.
        first = np.log([[1e-9, 1e-9, 1e-9, 0.9, 0.1, 1e-9]])
        later = np.log([[1e-9, 1e-9, 1e-9, 0.001, 0.999, 1e-9]])
        first, later = (tf.constant(x, tf.float32) for x in (first, later))

        def logits_fn(ids, step, state, static):
            del state, static  # Unused.
            logits = tf.where(step == 0, first, later)
            return tf.repeat(logits, tf.shape(ids)[0], 0), {}

        result = beam_search(
            logits_fn, tf.fill([1], BOS_ID), {}, {}, 6, 2, 10, alpha=4.0
        )
        self.assertEqual(result.lengths[0, 0], 10)
        self.assertAllEqual(result.ids[0, 0], [4] * 10)
        self.assertAllClose(
            result.scores[0, 0],
            np.log(0.1 * 0.999**9) / penalty(10, 4.0),
            rtol=1e-4,
        )

    def test_state_follows_hypotheses(self):
        # The logits depend only on the first generated token, read from the
        # state. "b" (5) overtakes "a" (4) at step 1, so the beams swap rows:
        # an ungathered state would mix the two continuations.
        log_probs = np.full([2, 6], -np.inf)
        log_probs[0, [4, 5, 1]] = np.log([0.5, 0.4, 0.1])  # step 0
        log_probs[1, [4, 1]] = np.log([0.6, 0.4])  # after "a"
        table = tf.constant(np.where(np.isinf(log_probs), -1e30, log_probs))
        table = tf.cast(table, tf.float32)
        b_table = tf.constant(
            [[-1e30, np.log(0.01), -1e30, -1e30, -1e30, np.log(0.99)]]
        )
        b_table = tf.cast(b_table, tf.float32)  # after "b": b 0.99

        def logits_fn(ids, step, state, static):
            del static  # Unused.
            first = tf.where(step == 1, ids, state["first"])  # [B*K]
            after = tf.where(
                (first == 5)[:, None],
                tf.repeat(b_table, tf.shape(ids)[0], 0),
                tf.gather(table, tf.ones_like(ids)),
            )
            step0 = tf.gather(table, tf.zeros_like(ids))
            return tf.where(step == 0, step0, after), {"first": first}

        result = beam_search(
            logits_fn,
            tf.fill([1], BOS_ID),
            {"first": tf.zeros([1], tf.int32)},
            {},
            vocab_size=6,
            beam_size=2,
            max_decode_length=4,
            eos_id=-1,
            num_return=2,
        )
        self.assertAllEqual(result.ids[0], [[5, 5, 5, 5], [4, 4, 4, 4]])
        self.assertAllClose(
            result.scores[0],
            np.log([0.4 * 0.99**3, 0.5 * 0.6**3]) / penalty(4, 0.6),
        )

    @parameterized.parameters(1, 2, 3)
    def test_state_reordered_by_its_own_function(self, seed):
        # In-place caches: only their ancestry follows the hypotheses
        # (`reorder_state`), and they are made for the B * K hypotheses
        # (`tile_state=False`). Gathering the tokens too (these seeds
        # reorder beams enough to tell), or tiling them again, would give
        # other results or fail.
        model = PrefixTable(3, 5, seed, eos_bias=-2.0)
        limits = [5, 5, 4]
        expected = self.search(model, limits, beam_size=3, num_return=2)
        result = beam_search(
            model.in_place_logits_fn,
            *model.in_place_inputs(3),
            vocab_size=model.vocab_size,
            beam_size=3,
            max_decode_length=limits,
            num_return=2,
            reorder_state=PrefixTable.reorder_ancestry,
            tile_state=False,
        )
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllEqual(result.lengths, expected.lengths)
        self.assertAllClose(result.scores, expected.scores)

    @parameterized.parameters(2, 4, 12, 256, 1024, 100_000)
    def test_max_alpha_is_the_largest_finite_penalty(self, max_length):
        bound = max_alpha(max_length)
        # In hundredths, as the error message shows it.
        self.assertAllClose(
            bound * 100.0, tf.round(bound * 100.0), rtol=0, atol=1e-3
        )
        # Finite at every length up to the longest, with and without XLA.
        lengths = tf.range(max_length + 1)
        compiled = tf.function(length_penalty, jit_compile=True)
        for penalty_fn in (length_penalty, compiled):
            self.assertTrue(np.all(np.isfinite(penalty_fn(lengths, bound))))
        # And tight: a hundredth (and the margin for float32 rounding)
        # further, the penalty at the longest output overflows.
        self.assertEqual(length_penalty(max_length, bound + 0.02), np.inf)

    def test_max_alpha_values(self):
        self.assertAllClose(max_alpha(256), 23.51)  # the default max_length
        self.assertAllClose(max_alpha(12), 85.19)
        # A penalty of at most 1 never overflows; an empty batch's largest
        # limit may be any non-positive number.
        for max_length in (1, 0, -(2**31)):
            self.assertEqual(max_alpha(max_length), np.inf)

    def test_largest_alpha_ranks_as_exhaustive_search(self):
        # At `max_alpha` the penalty at the longest output is near float32's
        # maximum: the scores are tiny but must stay finite, non-zero and
        # ranked. EOS is likely (bias 3), which puts the longest hypotheses'
        # log-probs below -4, where such scores are normal floats
        # (TensorFlow flushes subnormal ones to zero).
        model = PrefixTable(3, max_length=4, seed=7, eos_bias=3.0)
        limits = [4, 2, 3]
        alpha = 218.81  # max_alpha(4)
        result = self.search(
            model, limits, beam_size=36, alpha=alpha, num_return=4
        )
        self.assertAllLess(result.scores, 0.0)  # not the -0.0 of an inf penalty
        for sentence, limit in enumerate(limits):
            expected = model.exhaustive(sentence, limit, alpha, 4)
            # Relative only: an absolute tolerance passes scores of 0. The
            # float32 pow's error grows with the exponent (~88 here).
            self.assertAllClose(
                result.scores[sentence],
                [score for score, _ in expected],
                rtol=1e-4,
                atol=0,
            )
            for slot, (_, tokens) in enumerate(expected):
                self.assertAllEqual(
                    result.ids[sentence, slot], tokens + [0] * (4 - len(tokens))
                )

    def test_alpha_is_bounded_at_the_longest_output(self):
        model = PrefixTable(2, max_length=3, seed=5)
        three, two = 308.4, 575.55  # `max_alpha` of 3 and 2 tokens
        self.search(model, [3, 2], beam_size=2, alpha=three)
        message = re.escape(
            "`alpha` must be at most 308.4 here: the length penalty "
            "((5 + 3) / 6) ** alpha of the longest output overflows float32 "
            "beyond it (paper: 0.6). Received: alpha=575.55"
        )
        with self.assertRaisesRegex(ValueError, f"^{message}$"):
            self.search(model, [3, 2], beam_size=2, alpha=two)
        # Checked while tracing too, where the limits are known, with
        # AutoGraph (the default; its `round` of a tensor failed, and it
        # prefixes the "user code" frames to the message) or without.
        for autograph, expected in ((True, message), (False, f"^{message}$")):
            traced = tf.function(
                lambda: self.search(model, [3, 2], beam_size=2, alpha=two),
                autograph=autograph,
            )
            with self.assertRaisesRegex(ValueError, expected):
                traced()
        # The loop length lowers the longest output, and so raises the bound.
        self.search(model, [3, 2], beam_size=2, alpha=two, max_decode_steps=2)
        with self.assertRaisesRegex(ValueError, r"\(\(5 \+ 2\) / 6\)"):
            self.search(
                model, [3, 2], beam_size=2, alpha=two + 0.01, max_decode_steps=2
            )

    def test_limit_zero_returns_empty_hypotheses(self):
        model = PrefixTable(2, max_length=3, seed=5)
        result = self.search(model, [0, 3], beam_size=2, num_return=2)
        self.assertAllEqual(result.lengths[0], [0, 0])
        self.assertAllEqual(result.ids[0], tf.zeros([2, 3], tf.int32))
        self.assertAllClose(result.scores[0, 0], 0.0)
        self.assertTrue(np.all(np.isfinite(result.scores.numpy())))
        self.assertAllEqual(result.lengths[1] > 0, [True, True])

    def test_jit_compile_matches_eager(self):
        model = PrefixTable(3, max_length=5, seed=6, eos_bias=[1, 0, -1])
        limits = tf.constant([5, 3, 4])
        expected = self.search(model, limits, beam_size=4, num_return=2)

        @tf.function(jit_compile=True)
        def search(limits, alpha):
            return self.search(
                model, limits, beam_size=4, alpha=alpha, num_return=2
            )

        result = search(limits, tf.constant(0.6))
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllEqual(result.lengths, expected.lengths)
        self.assertAllClose(result.scores, expected.scores)

    def test_xla_never_sorts_the_vocabulary(self):
        # XLA on CPU lowers a top-k over [B, K*V] to a full sort (~100x
        # slower for V = 32k); the search must rank per beam instead.
        vocab_size = 2048
        embeddings = tf.random.stateless_normal([vocab_size, 16], seed=[1, 2])

        def logits_fn(ids, step, state, static):
            del step, static  # Unused.
            hidden = tf.gather(embeddings, ids)  # a model's logits: a matmul
            return tf.matmul(hidden, embeddings, transpose_b=True), state

        @tf.function(jit_compile=True)
        def search(limit):
            ids, state, static = tf.fill([2], BOS_ID), {}, {}
            return beam_search(
                logits_fn, ids, state, static, vocab_size, 4, limit
            )

        hlo = search.experimental_get_compiler_ir(tf.constant(3))(
            stage="optimized_hlo"
        )
        sorts = [line for line in hlo.splitlines() if " sort(" in line]
        sorted_sizes = [
            int(size)
            for line in sorts
            for size in re.findall(r"(\d+)[,\]]", line.split("sort(")[0])
        ]
        self.assertLess(max(sorted_sizes, default=0), vocab_size, sorts)

    @parameterized.parameters(False, True)
    def test_graph_without_autograph_and_signature(self, growing):
        # Keras export traces with autograph off and an unknown batch size.
        # `growing`: a state that grows by a step and untiled static tensors.
        model = PrefixTable(3, max_length=5, seed=8, eos_bias=[1, 0, -1])
        expected = self.search(model, [5, 2, 4], beam_size=3, num_return=3)
        logits_fn, inputs, options = model.logits_fn, model.inputs, {}
        if growing:
            logits_fn, inputs = model.growing_logits_fn, model.growing_inputs
            options = dict(
                state_shape_invariants={
                    "history": tf.TensorShape([None, None])
                },
                tile_static=False,
            )

        @tf.function(
            autograph=False,
            input_signature=[
                tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([], tf.float32),
            ],
        )
        def search(sentences, limits, alpha):
            return beam_search(
                logits_fn,
                *inputs(sentences),
                vocab_size=6,
                beam_size=3,
                max_decode_length=limits,
                alpha=alpha,
                num_return=3,
                **options,
            )

        result = search(tf.range(3), tf.constant([5, 2, 4]), tf.constant(0.6))
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllClose(result.scores, expected.scores)

    @parameterized.parameters(False, True)
    def test_graph_steps_run_on_the_single_threaded_executor(self, jit_compile):
        # Outside XLA the loop stays a functional While whose cond and body
        # name TensorFlow's single-threaded executor; XLA compiles it as is.
        model = PrefixTable(3, max_length=5, seed=9, eos_bias=[1, 0, -1])
        limits = tf.constant([5, 2, 4])
        expected = self.search(model, limits, beam_size=3, num_return=2)

        @tf.function(autograph=False, jit_compile=jit_compile)
        def search(limits):
            return self.search(model, limits, beam_size=3, num_return=2)

        graph = search.get_concrete_function(limits).graph
        (loop,) = [op for op in graph.get_operations() if "While" in op.type]
        executors = [
            loop.get_attr(name).attr["_executor"].s for name in ("cond", "body")
        ]
        if jit_compile:
            self.assertEqual(executors, [b"", b""])
        else:
            self.assertFalse(loop.get_attr("_lower_using_switch_merge"))
            self.assertEqual(executors, 2 * [b"SINGLE_THREADED_EXECUTOR"])
        result = search(limits)
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllClose(result.scores, expected.scores)

    def test_logits_function_with_its_own_cond_in_the_graph_loop(self):
        # The single-threaded executor runs no Switch/Merge dataflow: a
        # `tf.cond` inside the step must stay a functional If.
        model = PrefixTable(3, max_length=5, seed=10, eos_bias=[1, 0, -1])
        limits = tf.constant([5, 2, 4])
        expected = self.search(model, limits, beam_size=3, num_return=2)

        def logits_fn(ids, step, state, static):
            outputs = model.logits_fn(ids, step, state, static)
            return tf.cond(step >= 0, lambda: outputs, lambda: outputs)

        @tf.function(autograph=False)
        def search(limits):
            return beam_search(
                logits_fn,
                *model.inputs(),
                vocab_size=model.vocab_size,
                beam_size=3,
                max_decode_length=limits,
                num_return=2,
            )

        result = search(limits)
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllClose(result.scores, expected.scores)

    def test_num_return_larger_than_beam_size_fails(self):
        model = PrefixTable(1, max_length=2, seed=0)
        with self.assertRaisesRegex(
            ValueError,
            "`num_return` must be at most `beam_size`.*"
            "Received: num_return=5, beam_size=4",
        ):
            self.search(model, 2, beam_size=4, num_return=5)

    @parameterized.named_parameters(
        {
            "testcase_name": "beam_size",
            "error": ValueError,
            "message": (
                "`beam_size` must be a positive integer. Received: beam_size=0"
            ),
            "overrides": {"beam_size": 0},
        },
        {
            "testcase_name": "num_return_float",
            "error": TypeError,
            "message": (
                "`num_return` must be a Python int .* Received: num_return=1.0"
            ),
            "overrides": {"num_return": 1.0},
        },
        {
            "testcase_name": "negative_limit",
            "error": ValueError,
            "message": "`max_decode_length` must be non-negative. "
            r"Received: max_decode_length=\[2, -1\]",
            "overrides": {"max_decode_length": [2, -1]},
        },
        {
            "testcase_name": "limit_rank",
            "error": ValueError,
            "message": "must be a scalar or a \\[batch\\] vector. "
            r"Received: max_decode_length.shape=\(1, 2\)",
            "overrides": {"max_decode_length": [[2, 2]]},
        },
        {
            "testcase_name": "limits_per_sentence",
            "error": ValueError,
            "message": "`max_decode_length` must be a scalar or have one limit "
            r"per sentence. Received: max_decode_length.shape=\(3,\), "
            "batch_size=2",
            "overrides": {"max_decode_length": [2, 2, 2]},
        },
        {
            "testcase_name": "vocab_size",
            "error": ValueError,
            "message": r"logits of shape \[rows, vocab_size=5\].*"
            r"Received: logits.shape=\(2, 6\)",
            "overrides": {"vocab_size": 5},
        },
        # These failed inside TensorFlow (a negative shape, a cast of a
        # string) or not at all (a float was truncated, NaN scored NaN).
        {
            "testcase_name": "negative_steps",
            "error": ValueError,
            "message": "^`max_decode_steps` must be non-negative \\(the loop "
            "length\\). Received: max_decode_steps=-1$",
            "overrides": {"max_decode_steps": -1},
        },
        {
            "testcase_name": "float_steps",
            "error": TypeError,
            "message": "^`max_decode_steps` must be an integer or a tensor of "
            "integers. Received: max_decode_steps=2.5$",
            "overrides": {"max_decode_steps": 2.5},
        },
        {
            "testcase_name": "string_limit",
            "error": TypeError,
            "message": "^`max_decode_length` must be an integer or a tensor of "
            "integers. Received: max_decode_length='2'$",
            "overrides": {"max_decode_length": "2"},
        },
        {
            "testcase_name": "string_alpha",
            "error": TypeError,
            "message": "^`alpha` must be a number \\(the length penalty "
            "strength, paper: 0.6\\). Received: alpha='0.6'$",
            "overrides": {"alpha": "0.6"},
        },
        {
            "testcase_name": "alpha_overflows",
            "error": ValueError,
            "message": "^"
            + re.escape(
                "`alpha` must be at most 575.55 here: the length penalty "
                "((5 + 2) / 6) ** alpha of the longest output overflows "
                "float32 beyond it (paper: 0.6). Received: alpha=575.56"
            )
            + "$",
            "overrides": {"alpha": 575.56},
        },
        {
            "testcase_name": "nan_alpha",
            "error": ValueError,
            "message": "^`alpha` must be a non-negative number \\(paper: "
            "0.6\\). Received: alpha=nan$",
            "overrides": {"alpha": float("nan")},
        },
    )
    def test_bad_arguments_fail(self, error, message, overrides):
        model = PrefixTable(2, max_length=2, seed=0)
        kwargs = {"vocab_size": 6, "beam_size": 1, "max_decode_length": 2}
        kwargs.update(overrides)
        with self.assertRaisesRegex(error, message):
            beam_search(model.logits_fn, *model.inputs(), **kwargs)

    def test_state_that_changes_shape_fails(self):
        def logits_fn(ids, step, state, static):
            del step, static  # Unused.
            grown = tf.concat([state["cache"], state["cache"]], axis=1)
            return tf.zeros([tf.shape(ids)[0], 6]), {"cache": grown}

        with self.assertRaisesRegex(
            ValueError,
            r"keep their shapes.*Received: expected shape=\(2, 3\), "
            r"new shape=\(2, 6\)",
        ):
            beam_search(
                logits_fn,
                tf.fill([1], BOS_ID),
                {"cache": tf.zeros([1, 3])},
                {},
                vocab_size=6,
                beam_size=2,
                max_decode_length=3,
            )


class TopKTest(TestCase):
    @parameterized.parameters(
        (8, 32000), (8, 8000), (1, 4097), (4, 100), (8, 5000)
    )
    def test_equals_tf_top_k_with_ties_and_minus_inf(self, k, width):
        from keras_transformer.decoding.loop import top_k

        rng = np.random.default_rng(width)
        # Few distinct values: many ties, inside and across blocks.
        values = rng.integers(-3, 4, size=(6, width)).astype("float32")
        values[0] = -np.inf
        values[1, 5:] = -np.inf
        got_values, got_ids = top_k(tf.constant(values), k)
        want_values, want_ids = tf.math.top_k(values, k)
        self.assertAllEqual(got_values, want_values)
        self.assertAllEqual(got_ids, want_ids)

        continuous = rng.normal(size=(6, width)).astype("float32")
        compiled = tf.function(lambda x: top_k(x, k), jit_compile=True)
        got_values, got_ids = compiled(tf.constant(continuous))
        want_values, want_ids = tf.math.top_k(continuous, k)
        self.assertAllEqual(got_values, want_values)
        self.assertAllEqual(got_ids, want_ids)

    def test_ties_at_the_kth_value_go_to_the_lower_index_across_blocks(self):
        # The k-th value ties between a block with a larger maximum and an
        # earlier block: tf.math.top_k takes the earlier column.
        from keras_transformer.decoding.loop import top_k

        values = np.zeros((1, 1024), "float32")
        values[0, 160] = 5.0
        values[0, [48, 170]] = 1.0
        got_values, got_ids = top_k(tf.constant(values), 2)
        self.assertAllEqual(got_ids, [[160, 48]])
        self.assertAllEqual(got_values, [[5.0, 1.0]])

    @parameterized.parameters((8, 32000), (8, 4097), (3, 50))
    def test_top_log_probs_equal_log_softmax(self, k, width):
        from keras_transformer.decoding.loop import NEG_INF, top_log_probs

        rng = np.random.default_rng(width)
        logits = rng.normal(scale=4.0, size=(5, width)).astype("float32")
        logits[1] += 100.0  # exp(100) overflows float32: shift-invariant.
        logits[2, 1:] = -np.inf  # One finite logit: the rest clamp to NEG_INF.
        logits[3, ::2] = -np.inf
        want = tf.nn.log_softmax(logits.astype("float64"))
        want_values, want_ids = tf.math.top_k(want, k)
        for jit_compile in (False, True):
            function = tf.function(
                lambda x: top_log_probs(x, k, width), jit_compile=jit_compile
            )
            got_values, got_ids = function(tf.constant(logits))
            self.assertAllEqual(got_ids, want_ids)
            self.assertAllClose(
                got_values, np.maximum(want_values, NEG_INF), atol=2e-5, rtol=0
            )
            self.assertEqual(got_values[2, 0], 0.0)


# Two word tokens of PrefixTable's vocabulary of 6.
A, B = 4, 5


def canned(probabilities):
    """A one-sentence PrefixTable whose next-token distribution after BOS +
    each listed prefix is given ({prefix tuple: {token: p}}); unlisted
    tokens get p 1e-6 (PAD and BOS stay -inf)."""
    model = PrefixTable(1, max_length=4, seed=0)
    for prefix, probs in probabilities.items():
        logits = np.full(model.vocab_size, np.log(1e-6))
        for token, p in probs.items():
            logits[token] = np.log(p)
        logits[[0, BOS_ID]] = -np.inf
        model.table[0, model.code([BOS_ID, *prefix])] = logits
    model.tf_table = tf.constant(model.table, tf.float32)
    return model


class BeamSearchBoundaryTest(TestCase):
    """Cases at the edges of the search: several beams ending at once, exact
    ties, loop lengths below the limits, sentences without any token."""

    def test_beam_stays_full_when_several_beams_end_at_once(self):
        # Step 1: both beams' best extension is EOS (b EOS .24, a EOS .225),
        # the 2 best of the sentence, so they finish; the K = 2 beams alive
        # must be the next two, "a a" (.15) and "b b" (.14): 2K candidates
        # hold them. "b b b" (.14 * .999) then wins with alpha 4. A search
        # that ranks fewer candidates (e.g. K + 1) keeps only "a a" alive.
        model = canned(
            {
                (): {A: 0.5, B: 0.4, EOS_ID: 0.1},
                (A,): {EOS_ID: 0.45, A: 0.3, B: 0.25},
                (B,): {EOS_ID: 0.6, B: 0.35, A: 0.05},
                (A, A): {EOS_ID: 0.3, A: 0.35, B: 0.35},
                (B, B): {B: 0.999},
            }
        )
        result = beam_search(
            model.logits_fn,
            *model.inputs(),
            vocab_size=model.vocab_size,
            beam_size=2,
            max_decode_length=3,
            alpha=4.0,
        )
        self.assertAllEqual(result.ids[0, 0], [B, B, B])
        self.assertAllEqual(result.lengths[0, 0], 3)
        self.assertAllClose(
            result.scores[0, 0],
            sum(model.log_probs(0, [B, B, B][:i])[B] for i in range(3))
            / penalty(3, 4.0),
            rtol=1e-5,
        )

    def test_exact_tie_with_the_best_alive_hypothesis_stops_the_search(self):
        # "Done when its n-th finished score is at least the best alive
        # log-probability over the largest reachable penalty": with alpha 0
        # EOS (p .5) ties with "a" (p .5) after one step; nothing longer
        # can do better, so one step suffices.
        model = canned({(): {EOS_ID: 0.5, A: 0.5}, (A,): {A: 1.0}})
        result = beam_search(
            model.logits_fn,
            *model.inputs(),
            vocab_size=model.vocab_size,
            beam_size=1,
            max_decode_length=4,
            alpha=0.0,
        )
        self.assertEqual(model.calls, 1)
        self.assertAllEqual(result.ids[0, 0], [EOS_ID, 0, 0, 0])
        self.assertAllClose(result.scores[0, 0], model.log_probs(0, [])[EOS_ID])

    def test_max_decode_steps_below_the_limits_is_the_limit(self):
        # "limits above it are lowered to it": hypotheses reaching the loop
        # length end there and compete with those ended by EOS, exactly as
        # with limits of that length.
        model = PrefixTable(3, max_length=5, seed=3, eos_bias=[0.5, 0, -1])
        expected = beam_search(
            model.logits_fn,
            *model.inputs(),
            model.vocab_size,
            3,
            max_decode_length=[3, 3, 3],
            num_return=3,
        )
        result = beam_search(
            model.logits_fn,
            *model.inputs(),
            model.vocab_size,
            3,
            max_decode_length=[5, 5, 4],
            num_return=3,
            max_decode_steps=3,
        )
        self.assertEqual(result.ids.shape, (3, 3, 3))
        self.assertAllEqual(result.ids, expected.ids)
        self.assertAllEqual(result.lengths, expected.lengths)
        self.assertAllClose(result.scores, expected.scores)
        # fixture: some best hypotheses stop at the loop length, without EOS
        self.assertIn(3, result.lengths.numpy()[:, 0])

    def test_hypotheses_without_any_token_have_only_zero_ids(self):
        # A sentence whose every token is -inf (a logits function that
        # forbids them all) gets N empty hypotheses: length 0, ids 0.
        def logits_fn(ids, step, state, static):
            del step  # Unused.
            # static is tiled for the beams (tile_static=True): [B*K].
            finite = static["finite"][:, None]
            logits = tf.where(finite, tf.zeros([tf.shape(ids)[0], 6]), -np.inf)
            return logits, state

        result = beam_search(
            logits_fn,
            tf.fill([2], BOS_ID),
            {},
            {"finite": tf.constant([True, False])},
            vocab_size=6,
            beam_size=2,
            max_decode_length=3,
            num_return=2,
        )
        self.assertAllEqual(result.lengths[1], [0, 0])
        self.assertAllEqual(result.ids[1], tf.zeros([2, 3], tf.int32))

    def test_a_one_element_limit_vector_applies_to_every_sentence(self):
        # decode_limits accepts a scalar, [B] or [1] (broadcast).
        model = PrefixTable(3, max_length=4, seed=6, eos_bias=-1.0)
        for search in (
            lambda limits: beam_search(
                model.logits_fn, *model.inputs(), model.vocab_size, 2, limits
            ),
            lambda limits: greedy_search(
                model.logits_fn, *model.inputs(), limits
            ),
        ):
            expected, result = search(3), search([3])
            self.assertAllEqual(result.ids, expected.ids)
            self.assertAllEqual(result.lengths, expected.lengths)
