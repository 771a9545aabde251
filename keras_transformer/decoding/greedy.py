"""Greedy decoding: the most probable token at every step.

Shape legend: B batch, V vocabulary, L loop length (the largest
`max_decode_length` of the batch).
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.loop import (
    decode_limits,
    decoding_loop,
    keep_shapes,
    loop_shape_invariants,
    state_invariants,
    top_log_probs,
)
from keras_transformer.tokens import EOS_ID


class GreedyResult(NamedTuple):
    """One hypothesis per sentence (a NamedTuple so `tf.function` returns it).

    Attributes:
        ids: int32 [B, L], generated tokens without BOS, 0 after the end.
        log_probs: float32 [B], log P(Y), without length penalty (greedy
            choices do not depend on it).
        lengths: int32 [B], |Y|: tokens generated, EOS included.
    """

    ids: tf.Tensor
    log_probs: tf.Tensor
    lengths: tf.Tensor


def greedy_search(
    symbols_to_logits_fn,
    initial_ids,
    state,
    static,
    max_decode_length,
    eos_id=EOS_ID,
    state_shape_invariants=None,
):
    """Appends the arg-max token until EOS or `max_decode_length`.

    A plain `tf.while_loop` (no autograph) with static shapes for XLA; it ends
    when every sentence has ended, and an ended sentence stops growing.

    Args:
        symbols_to_logits_fn: `fn(ids, step, state, static) -> (logits,
            new_state)`, with ids int32 [B], the decoder input at position
            `step` (BOS at step 0), and logits [B, V] for the next token; the
            same function as for `beam_search` (with K = 1).
        initial_ids: int32 [B], the first decoder input (BOS).
        state: nest of [B, ...] tensors the function updates (K/V caches).
        static: nest of [B, ...] tensors passed through unchanged.
        max_decode_length: int scalar or [B], the most tokens a sentence may
            have, EOS included.
        eos_id: the end token; -1 never ends (runs `max_decode_length` steps).
        state_shape_invariants: as for `beam_search` (growing caches).

    Returns:
        A `GreedyResult`.

    Raises:
        TypeError: if `max_decode_length` is not of integers.
        ValueError: if `initial_ids`, `max_decode_length` or the logits are
            malformed.
    """
    initial_ids = tf.cast(initial_ids, tf.int32)
    if initial_ids.shape.rank not in (None, 1):
        # The loop feeds back [B] tokens: a [B, 1] start fails inside it.
        raise ValueError(
            "`initial_ids` must be a [batch] vector, the first decoder input "
            "(BOS) of each sentence. "
            f"Received: initial_ids.shape={initial_ids.shape}"
        )
    batch_size = tf.shape(initial_ids)[0]
    # The static batch size where known, so that `decode_limits` checks it.
    limits, loop_length = decode_limits(
        max_decode_length, initial_ids.shape[0] or batch_size
    )
    invariants = state_invariants(state, state_shape_invariants)

    def step_fn(step, ids, seq, log_probs, lengths, state, done):
        logits, new_state = symbols_to_logits_fn(ids, step, state, static)
        new_state = keep_shapes(new_state, invariants)
        chosen, next_ids = top_log_probs(logits, 1)  # [B, 1]
        grow = ~done  # [B]
        next_ids = tf.where(grow, next_ids[:, 0], 0)
        column = tf.one_hot(step, loop_length, dtype=tf.int32)  # [L]
        seq += next_ids[:, None] * column  # [B, L]
        log_probs += tf.where(grow, chosen[:, 0], 0.0)
        lengths += tf.cast(grow, tf.int32)
        done |= (next_ids == eos_id) | (step + 1 >= limits)
        return step + 1, next_ids, seq, log_probs, lengths, new_state, done

    def not_done(step, ids, seq, log_probs, lengths, state, done):
        del ids, seq, log_probs, lengths, state  # Unused.
        return (step < loop_length) & ~tf.reduce_all(done)

    loop_vars = (
        tf.constant(0),
        initial_ids,
        tf.zeros(tf.stack([batch_size, loop_length]), tf.int32),
        tf.zeros([batch_size], tf.float32),
        tf.zeros([batch_size], tf.int32),
        state,
        limits <= 0,
    )
    _, _, seq, log_probs, lengths, _, _ = decoding_loop(
        not_done,
        step_fn,
        loop_vars,
        shape_invariants=loop_shape_invariants(loop_vars, 5, invariants),
    )
    return GreedyResult(ids=seq, log_probs=log_probs, lengths=lengths)
