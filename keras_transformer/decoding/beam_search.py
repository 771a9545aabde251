"""Beam search with the GNMT length penalty over a logits function (sec. 6.1).

Shape legend: B batch, K beam, V vocabulary, N hypotheses returned,
L loop length (the largest `max_decode_length` of the batch).
"""

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from keras_transformer.checks import is_integer, is_real
from keras_transformer.decoding.loop import (
    NEG_INF,
    decode_limits,
    decoding_loop,
    integer_tensor,
    keep_shapes,
    loop_shape_invariants,
    state_invariants,
    top_log_probs,
)
from keras_transformer.tokens import EOS_ID


class BeamSearchResult(NamedTuple):
    """The top-n hypotheses per sentence, best first.

    A NamedTuple (not a dataclass) so that `tf.function` can return it.

    Attributes:
        ids: int32 [B, N, L], generated tokens without BOS, 0 after the end.
        scores: float32 [B, N], log P(Y) / length_penalty(|Y|).
        lengths: int32 [B, N], |Y|: tokens generated, EOS included.
    """

    ids: tf.Tensor
    scores: tf.Tensor
    lengths: tf.Tensor


def length_penalty(length, alpha):
    """The GNMT length penalty `((5 + |Y|) / 6) ** alpha` (Wu et al. 2016).

    Args:
        length: |Y|, number of generated tokens including EOS (int or tensor).
        alpha: the penalty strength (paper: 0.6); 0 ranks by log-probability.

    Returns:
        float32 tensor of the shape of `length`.
    """
    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, tf.cast(alpha, tf.float32))


# alpha * log((5 + |Y|) / 6) above log(float32 max) overflows the penalty.
_LOG_FLOAT32_MAX = float(np.log(np.finfo(np.float32).max))
# The bound is lowered by this fraction before rounding: the penalty's
# float32 base and pow (and alpha's own rounding to float32) err by a few
# 1e-7 relative, which at the very bound could still overflow.
_ALPHA_MARGIN = 1e-5

# The error of an `alpha` above `max_alpha`, {} the bound and the longest
# output: formatted by `check_alpha_bound` in Python, and by
# `tf.strings.format` for a request's `alpha` checked in the graph.
ALPHA_TOO_LARGE = (
    "`alpha` must be at most {} here: the length penalty ((5 + {}) / 6) ** "
    "alpha of the longest output overflows float32 beyond it (paper: 0.6)."
)


def max_alpha(max_length):
    """The largest `alpha` whose length penalty is finite in float32.

    `((5 + |Y|) / 6) ** alpha` overflows float32 to inf for a large alpha
    (from about 23.5 at 256 tokens); every score `log P(Y) / inf` is then
    -0.0, and the search would rank its hypotheses arbitrarily. The bound
    holds for the penalty as the search computes it (in float32) at every
    length up to `max_length`, and is rounded down to hundredths. Near it
    the longest hypotheses' scores are tiny: those below float32's smallest
    normal number (log-probs above about -4 at the bound) are flushed to
    -0.0 by TensorFlow, as any subnormal result is.

    Args:
        max_length: |Y| of the longest output the search can produce, an
            int or int32 scalar tensor.

    Returns:
        float32 scalar tensor: the bound, or inf when `max_length` <= 1
        (a penalty of at most 1 never overflows).
    """
    # (5 + |Y|) / 6 as the penalty computes it, in float32; the rest in
    # float64, so that Python and a graph (where Grappler turns `/ 100`
    # into `* 0.01`) round the hundredths to the same float32.
    base = tf.cast(length_penalty(max_length, 1.0), tf.float64)
    bound = _LOG_FLOAT32_MAX * (1.0 - _ALPHA_MARGIN) / tf.math.log(base)
    bound = tf.where(base > 1.0, tf.floor(100.0 * bound) / 100.0, float("inf"))
    return tf.cast(bound, tf.float32)


# Python numbers only: AutoGraph (in a caller's `tf.function`) would turn its
# `float` and `round` into tensor ops.
@tf.autograph.experimental.do_not_convert
def check_alpha_bound(alpha: float, max_length: int) -> None:
    """Checks that `alpha` is at most `max_alpha(max_length)`.

    Args:
        alpha: the length penalty strength, a Python number.
        max_length: |Y| of the longest output the search can produce, a
            Python int.

    Raises:
        ValueError: if the length penalty at `max_length` would overflow
            float32; the message gives the bound.
    """
    # Eagerly even while a `tf.function` traces: both values are Python's.
    with tf.init_scope():
        # The hundredths as a Python float: 23.51 passes, as the message
        # says, though 23.51 > float32(23.51), which it rounds to.
        bound = round(float(max_alpha(max_length)), 2)
    if alpha > bound:
        raise ValueError(
            ALPHA_TOO_LARGE.format(bound, max_length)
            + f" Received: alpha={alpha!r}"
        )


def _check_per_sentence(static, batch_size):
    """Raises a ValueError when `tile_static` would repeat something that is
    not per sentence (a None, or a tensor of another leading size where the
    sizes are known), instead of an error from inside `tf.repeat` or from
    the step's matmuls."""
    for leaf in tf.nest.flatten(static):
        shape = (
            None if leaf is None else tf.TensorShape(getattr(leaf, "shape", ()))
        )
        if shape is None or shape.rank == 0:
            fits = False  # Nothing to repeat per sentence.
        else:
            rows = shape[0] if shape.rank else None  # None: unknown rank.
            fits = None in (rows, batch_size) or rows == batch_size
        if not fits:
            shape = None if shape is None else tuple(shape)
            raise ValueError(
                "With tile_static=True every tensor of `static` is a [B, ...] "
                "tensor of the sentences, repeated for the K beams. Pass "
                "tile_static=False for a static that holds weights or None "
                "(such as Transformer.initial_decoding_state's step constants, "
                "whose cross-attention groups the beams itself, as "
                "transformer_beam_search does). Received: a static entry of "
                f"shape {shape}, batch size {batch_size}"
            )


def check_alpha(alpha, max_length=None) -> float:
    """Returns the length penalty strength `alpha` (a Python number) as a
    float.

    Args:
        alpha: the length penalty strength (paper: 0.6).
        max_length: |Y| of the longest output the search can produce, or
            None where it is not known (while tracing).

    Raises:
        TypeError: if `alpha` is not a number.
        ValueError: if it is negative, not finite, or above
            `max_alpha(max_length)`.
    """
    if not is_real(alpha):
        raise TypeError(
            "`alpha` must be a number (the length penalty strength, paper: "
            f"0.6). Received: alpha={alpha!r}"
        )
    if not math.isfinite(alpha) or alpha < 0:
        raise ValueError(
            "`alpha` must be a non-negative number (paper: 0.6). "
            f"Received: alpha={alpha!r}"
        )
    if max_length is not None:
        check_alpha_bound(alpha, max_length)
    return float(alpha)


def _check_alpha(alpha, max_length):
    """`alpha` as a float32 tensor, checked as `check_alpha` checks it; a
    tensor's value is not known here (its dtype is checked)."""
    if tf.is_tensor(alpha):
        if not (alpha.dtype.is_floating or alpha.dtype.is_integer):
            raise TypeError(
                "`alpha` must be a number or a numeric tensor. "
                f"Received: alpha={alpha!r}"
            )
        return tf.cast(alpha, tf.float32)
    return tf.constant(check_alpha(alpha, max_length), tf.float32)


def _check_sizes(vocab_size, beam_size, num_return):
    for name, value in (
        ("vocab_size", vocab_size),
        ("beam_size", beam_size),
        ("num_return", num_return),
    ):
        if not is_integer(value):
            raise TypeError(
                f"`{name}` must be a Python int (it fixes tensor shapes). "
                f"Received: {name}={value!r}"
            )
        if value < 1:
            raise ValueError(
                f"`{name}` must be a positive integer. Received: {name}={value}"
            )
    if num_return > beam_size:
        raise ValueError(
            "`num_return` must be at most `beam_size`: a beam keeps only "
            "`beam_size` hypotheses. Lower `num_return` or raise `beam_size`. "
            f"Received: num_return={num_return}, beam_size={beam_size}"
        )


def _check_num_needed(num_needed, num_return):
    """`num_needed` as given; a Python integer outside [1, `num_return`]
    raises a ValueError (a tensor is the caller's to check: under XLA an
    assertion is a no-op)."""
    if tf.is_tensor(num_needed):
        return tf.cast(num_needed, tf.int32)
    if not is_integer(num_needed) or not 1 <= num_needed <= num_return:
        raise ValueError(
            "`num_needed` must be an integer in [1, num_return]. Received: "
            f"num_needed={num_needed!r}, num_return={num_return}"
        )
    return int(num_needed)


def beam_search(
    symbols_to_logits_fn,
    initial_ids,
    state,
    static,
    vocab_size,
    beam_size,
    max_decode_length,
    alpha=0.6,
    eos_id=EOS_ID,
    num_return=1,
    max_decode_steps=None,
    state_shape_invariants=None,
    tile_static=True,
    reorder_state=None,
    tile_state=True,
    num_needed=None,
):
    """Finds the hypotheses Y of highest log P(Y) / length_penalty(|Y|).

    Each step extends the K alive hypotheses of every sentence by every token
    and ranks the extensions. Those among the K best that end move into the
    top-n finished set; the K best that do not end stay alive (2K candidates
    always hold K of them). As in fairseq, an extension outside the K best
    never ends, so beam size 1 is greedy search when alpha is 0. A
    hypothesis ends with EOS or when it reaches its sentence's
    `max_decode_length` (then it has no EOS). A sentence is done
    when its n-th finished score is at least the best alive log-probability
    divided by the largest penalty still reachable: log-probabilities only
    fall, so no alive hypothesis can enter the top n any more. The loop ends
    when every sentence is done. Done sentences stop growing, so finished
    scores never change. Everything is a plain `tf.while_loop` (no
    autograph), with static shapes for XLA (`jit_compile=True`).

    Args:
        symbols_to_logits_fn: `fn(ids, step, state, static) -> (logits,
            new_state)`, with ids int32 [B*K], the decoder input at position
            `step` (BOS at step 0); logits [B*K, V] for the next token; the
            state and static nests as below, flattened to [B*K, ...] with
            the beams of a sentence adjacent.
        initial_ids: int32 [B], the first decoder input (BOS).
        state: nest of [B, ...] tensors that follow hypotheses (fixed-size
            self-attention caches), moved by `reorder_state` at every step.
        static: nest of [B, ...] tensors that do not (encoder output,
            cross-attention keys/values, padding mask): tiled once, unless
            `tile_static` is False.
        vocab_size: V, a Python int.
        beam_size: K, a Python int (paper: 4).
        max_decode_length: int scalar or [B], the most tokens a hypothesis
            may have, EOS included (paper: source length + 50).
        alpha: length penalty strength, float or scalar tensor (paper: 0.6),
            at most `max_alpha` of the longest output (a float is checked
            where that length is known while tracing).
        eos_id: the end token; -1 never ends, so every hypothesis runs to
            `max_decode_length` (benchmarks).
        num_return: N, hypotheses returned per sentence, a Python int <= K.
        max_decode_steps: L, the loop length and the length of the returned
            ids; limits above it are lowered to it. Defaults to the largest
            `max_decode_length`. Under XLA every shape must be known when
            compiling, so when the limits are data (e.g. source length +
            50), pass a bound that is not, such as a shape.
        state_shape_invariants: for states whose shape changes from step
            to step (growing caches, e.g. `layers.cache_shape_invariants`),
            a nest of `tf.TensorShape`s like `state`, None along the axes
            that change. Not under XLA, which needs static shapes.
        tile_static: False passes `static` as [B, ...] for a function that
            groups the K beams of each sentence itself (K times less memory
            read; `Transformer.decode_step` does so in cross-attention).
        reorder_state: `fn(state, rows) -> state`, the state of the
            hypotheses kept at a step, with rows int32 [B*K] the row each
            continues. Defaults to a `tf.gather` of every tensor; caches
            that are never reordered (`Transformer.reorder_decoding_state`
            of in-place caches) move less.
        tile_state: False passes `state` as [B*K, ...], made for the
            hypotheses (in-place caches), instead of tiling [B, ...].
        num_needed: how many of the N returned hypotheses must be the best
            ones, an int or int32 scalar tensor in [1, N] (default N): a
            sentence is done once those are final, the others left as they
            are then (a request for fewer than N, in a graph built for N).

    Returns:
        A `BeamSearchResult` sorted by score. A sentence without any
        finished hypothesis (limit 0) returns its alive ones.

    Raises:
        TypeError: if `vocab_size`, `beam_size` or `num_return` is not an int,
            `max_decode_length` or `max_decode_steps` not of integers, or
            `alpha` not a number.
        ValueError: if one of the sizes is not positive, if `num_return`
            exceeds `beam_size`, if `max_decode_steps` is negative or `alpha`
            negative or not finite, if `alpha` is a number above
            `max_alpha` of the longest output (where that is known while
            tracing), or if `max_decode_length` or the logits are
            malformed.
    """
    _check_sizes(vocab_size, beam_size, num_return)
    k, v, n = int(beam_size), int(vocab_size), int(num_return)
    # The index of the last hypothesis that must be final (see num_needed).
    last = n - 1 if num_needed is None else _check_num_needed(num_needed, n) - 1
    initial_ids = tf.cast(initial_ids, tf.int32)
    batch_size = tf.shape(initial_ids)[0]
    # The static batch size where known, so that `decode_limits` checks it.
    limits, loop_length = decode_limits(
        max_decode_length, initial_ids.shape[0] or batch_size
    )
    # Bounds of the longest output: the largest limit and the loop length.
    bounds = [loop_length]
    if max_decode_steps is not None:
        steps = integer_tensor("max_decode_steps", max_decode_steps)
        if steps.shape.rank not in (None, 0):
            raise ValueError(
                "`max_decode_steps` must be a scalar (the loop length). "
                f"Received: max_decode_steps.shape={steps.shape}"
            )
        known = tf.get_static_value(steps)
        # Otherwise a negative shape error from inside TensorFlow.
        if known is not None and known < 0:
            raise ValueError(
                "`max_decode_steps` must be non-negative (the loop length). "
                f"Received: max_decode_steps={int(known)}"
            )
        loop_length = (
            int(known) if known is not None else tf.cast(steps, tf.int32)
        )
        limits = tf.minimum(limits, loop_length)
        bounds.append(loop_length)
    # The tightest of those known while tracing (Python ints), if any.
    longest = min((n for n in bounds if isinstance(n, int)), default=None)
    alpha = _check_alpha(alpha, longest)
    per_beam = min(2 * k, v)
    num_candidates = min(2 * k, k * v)

    # [B, ...] -> [B*K, ...]: row b * K + j is beam j of sentence b.
    def tile(x):
        return tf.repeat(x, k, axis=0)

    if tile_state:
        state = tf.nest.map_structure(tile, state)
    if reorder_state is None:

        def reorder_state(state, rows):
            return tf.nest.map_structure(lambda x: tf.gather(x, rows), state)

    if tile_static:
        _check_per_sentence(static, initial_ids.shape[0])
        static = tf.nest.map_structure(tile, static)
    invariants = state_invariants(state, state_shape_invariants)
    row_offsets = tf.range(batch_size)[:, None] * k  # [B, 1]
    own_beam = tf.range(k)[None, :]  # [1, K]

    def step_fn(step, alive, finished, state, done):
        alive_ids, alive_seq, alive_log_probs = alive  # [B, K], [B, K, L]
        fin_seq, fin_scores, fin_lengths = finished  # [B, N, L], [B, N]
        logits, new_state = symbols_to_logits_fn(
            tf.reshape(alive_ids, [-1]), step, state, static
        )
        new_state = keep_shapes(new_state, invariants)
        # The 2K best tokens of every beam hold the 2K best of the sentence.
        # Two small top-k's: XLA on CPU sorts a [B, K*V] top-k in full.
        beam_log_probs, beam_ids = top_log_probs(logits, per_beam, v)
        # [B*K, 2K] -> [B, K*2K]: the beams of a sentence side by side.
        beam_log_probs = tf.reshape(beam_log_probs, [-1, k * per_beam])
        beam_log_probs += tf.repeat(alive_log_probs, per_beam, axis=1)
        cand_log_probs, cand_index = tf.math.top_k(
            beam_log_probs, num_candidates
        )  # [B, 2K]
        cand_origin = cand_index // per_beam  # the alive beam extended
        beam_ids = tf.reshape(beam_ids, [-1, k * per_beam])
        cand_ids = tf.gather(beam_ids, cand_index, batch_dims=1)
        cand_seq = tf.gather(alive_seq, cand_origin, batch_dims=1)
        column = tf.one_hot(step, loop_length, dtype=tf.int32)  # [L]
        cand_seq += cand_ids[:, :, None] * column  # [B, 2K, L]
        length = step + 1
        valid = (cand_log_probs > NEG_INF / 2) & ~done[:, None]
        ends = (cand_ids == eos_id) | (length >= limits)[:, None]

        # The K best extensions that did not end stay alive.
        alive_scores = tf.where(valid & ~ends, cand_log_probs, NEG_INF)
        new_log_probs, pick = tf.math.top_k(alive_scores, k)  # [B, K]
        keep = done[:, None]  # done sentences keep their beams unchanged
        new_alive = (
            tf.where(keep, alive_ids, tf.gather(cand_ids, pick, batch_dims=1)),
            tf.where(
                keep[:, :, None],
                alive_seq,
                tf.gather(cand_seq, pick, batch_dims=1),
            ),
            tf.where(keep, alive_log_probs, new_log_probs),
        )
        origin = tf.where(
            keep, own_beam, tf.gather(cand_origin, pick, batch_dims=1)
        )
        rows = tf.reshape(row_offsets + origin, [-1])  # [B*K]
        new_state = reorder_state(new_state, rows)

        # Ended extensions among the K best compete with the finished ones.
        ended = (valid & ends)[:, :k]  # [B, K]
        scores = cand_log_probs[:, :k] / length_penalty(length, alpha)
        scores = tf.concat([fin_scores, tf.where(ended, scores, NEG_INF)], 1)
        new_fin_scores, pick = tf.math.top_k(scores, n)  # [B, N], of N + K
        seqs = tf.concat([fin_seq, cand_seq[:, :k]], 1)  # [B, N + K, L]
        lengths = tf.concat([fin_lengths, tf.where(ended, length, 0)], 1)
        new_finished = (
            tf.gather(seqs, pick, batch_dims=1),
            new_fin_scores,
            tf.gather(lengths, pick, batch_dims=1),
        )

        # Done: the limit is reached, nothing is alive, or even the best alive
        # log-prob over the largest reachable penalty cannot beat the N-th.
        best_alive = new_alive[2][:, 0]  # [B], top_k sorts
        max_penalty = tf.maximum(
            length_penalty(length + 1, alpha), length_penalty(limits, alpha)
        )
        hopeless = (tf.gather(new_finished[2], last, axis=1) > 0) & (
            tf.gather(new_fin_scores, last, axis=1) >= best_alive / max_penalty
        )
        done |= (length >= limits) | (best_alive <= NEG_INF / 2) | hopeless
        return step + 1, new_alive, new_finished, new_state, done

    def not_done(step, alive, finished, state, done):
        del alive, finished, state  # Unused.
        return (step < loop_length) & ~tf.reduce_all(done)

    seq_shape = tf.stack([batch_size, k, loop_length])  # [B, K, L]
    alive = (
        tf.reshape(tile(initial_ids), [-1, k]),
        tf.zeros(seq_shape, tf.int32),
        # Only beam 0 is real at first: K copies would fill the beam with
        # duplicates.
        tf.tile([[0.0] + [NEG_INF] * (k - 1)], [batch_size, 1]),
    )
    fin_shape = tf.stack([batch_size, n])
    finished = (
        tf.zeros(tf.concat([fin_shape, [loop_length]], 0), tf.int32),
        tf.fill(fin_shape, NEG_INF),
        tf.zeros(fin_shape, tf.int32),
    )
    loop_vars = (tf.constant(0), alive, finished, state, limits <= 0)
    step, alive, finished, _, _ = decoding_loop(
        not_done,
        step_fn,
        loop_vars,
        shape_invariants=loop_shape_invariants(loop_vars, 3, invariants),
    )
    return _best_hypotheses(step, alive, finished, limits, alpha, n)


def _best_hypotheses(step, alive, finished, limits, alpha, n):
    """The finished top N, or the alive top N where nothing finished."""
    _, alive_seq, alive_log_probs = alive
    fin_seq, fin_scores, fin_lengths = finished
    alive_lengths = tf.minimum(step, limits)  # [B]
    alive_valid = alive_log_probs[:, :n] > NEG_INF / 2  # [B, N]
    alive_scores = tf.where(
        alive_valid,
        alive_log_probs[:, :n] / length_penalty(alive_lengths, alpha)[:, None],
        NEG_INF,
    )
    alive_lengths = tf.where(alive_valid, alive_lengths[:, None], 0)
    use_alive = fin_lengths[:, :1] == 0  # [B, 1]
    ids = tf.where(use_alive[:, :, None], alive_seq[:, :n], fin_seq)
    lengths = tf.where(use_alive, alive_lengths, fin_lengths)
    return BeamSearchResult(
        ids=ids * tf.cast(lengths > 0, tf.int32)[:, :, None],  # fillers -> 0
        scores=tf.where(use_alive, alive_scores, fin_scores),
        lengths=lengths,
    )
