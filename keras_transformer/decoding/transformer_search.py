"""Encoder + cached beam search of a `Transformer` over token ids: the one
search that the translator, its export and the benchmarks run.

Shape legend: B batch, S source length, K beam.
"""

import tensorflow as tf

from keras_transformer.checks import is_integer
from keras_transformer.decoding.beam_search import (
    BeamSearchResult,
    beam_search,
)
from keras_transformer.decoding.loop import decode_limits
from keras_transformer.tokens import BOS_ID, EOS_ID

# Searches over parts of a batch that run side by side without XLA: the
# executor then keeps both cores of a small machine busy where one search's
# small per-step ops leave the second mostly idle (A/B in one process, batch
# 32: small 367 -> 324 ms a call, base 1792 -> 1679 ms; 4 parts were slower).
DEFAULT_PARALLEL_SEARCHES = 2


def transformer_beam_search(
    model,
    source_ids,
    beam_size,
    max_decode_length,
    alpha=0.6,
    num_return=1,
    max_decode_steps=None,
    eos_id=EOS_ID,
    fixed_size=False,
    parallel_searches=1,
    decoding_weights=None,
    num_needed=None,
):
    """Encoder + cached beam search of a `Transformer` over token ids.

    The translator and the benchmarks decode through this one function, so
    the benchmarks time what an export serves.

    Args:
        model: a `Transformer`.
        source_ids: int32 [B, S], 0 = padding.
        beam_size: K, a Python int.
        max_decode_length: int scalar or [B], see `beam_search`.
        alpha: length penalty strength.
        num_return: N, hypotheses returned per sentence.
        max_decode_steps: L, the loop length (see `beam_search`); with
            `fixed_size`, also the length of the caches.
        eos_id: the end token; -1 never ends (benchmarks).
        fixed_size: self-attention caches of `max_decode_steps` positions
            written by a scatter and reordered by a gather (static shapes,
            for XLA) rather than in-place ones, which a step neither copies
            nor reorders (faster without XLA).
        parallel_searches: P, a Python int: the batch is split into P parts
            of B // P or B // P + 1 sentences (in order, some empty when
            B < P), searched by P independent loops that TensorFlow's
            executor runs side by side. Sentences never interact in a beam
            search, so the results are those of one search.
        decoding_weights: `model.decoding_weights()`, computed when None
            (once for all the parallel searches: one copy in memory).
        num_needed: see `beam_search`.

    Returns:
        A `BeamSearchResult`.

    Raises:
        ValueError: if `parallel_searches` is not a positive integer.
    """
    check_parallel_searches(parallel_searches)
    if parallel_searches > 1:
        limits, loop_length = decode_limits(
            max_decode_length, tf.shape(source_ids)[0]
        )
        # One loop length for all parts, so that their ids line up.
        if max_decode_steps is None:
            max_decode_steps = loop_length
        if decoding_weights is None:
            decoding_weights = model.decoding_weights()
        results = [
            transformer_beam_search(
                model,
                part_ids,
                beam_size,
                part_limits,
                alpha=alpha,
                num_return=num_return,
                max_decode_steps=max_decode_steps,
                eos_id=eos_id,
                fixed_size=fixed_size,
                decoding_weights=decoding_weights,
                num_needed=num_needed,
            )
            for part_ids, part_limits in zip(
                _split_batch(source_ids, parallel_searches),
                _split_batch(limits, parallel_searches),
            )
        ]
        return BeamSearchResult(
            *(tf.concat(parts, axis=0) for parts in zip(*results))
        )

    memory, memory_mask = model.encode(source_ids)  # [B, S, D]
    if max_decode_steps is None:
        _, max_decode_steps = decode_limits(
            max_decode_length, tf.shape(source_ids)[0]
        )
    self_cache, constants = model.initial_decoding_state(
        memory,
        max_decode_steps,
        decoding_weights,
        beam_size=None if fixed_size else beam_size,
    )

    def symbols_to_logits_fn(ids, step, state, static):
        step_constants, mask = static
        return model.decode_step(ids, step, state, step_constants, mask)

    return beam_search(
        symbols_to_logits_fn,
        initial_ids=tf.fill([tf.shape(source_ids)[0]], BOS_ID),
        state=self_cache,
        static=(constants, memory_mask),
        vocab_size=model.config.vocab_size,
        beam_size=beam_size,
        max_decode_length=max_decode_length,
        alpha=alpha,
        eos_id=eos_id,
        num_return=num_return,
        max_decode_steps=max_decode_steps,
        # Cross-attention groups the K beams of a sentence itself; the
        # decoder's weights and the output kernel are not per sentence.
        tile_static=False,
        reorder_state=model.reorder_decoding_state,
        # In-place caches are made for the B * K hypotheses.
        tile_state=fixed_size,
        num_needed=num_needed,
    )


def check_parallel_searches(value):
    """`value` as an int, if it is a positive integer (a ValueError names it
    otherwise)."""
    if not is_integer(value) or value < 1:
        raise ValueError(
            "`parallel_searches` must be a positive integer (1 searches the "
            f"whole batch at once). Received: parallel_searches={value!r}"
        )
    return int(value)


def _split_batch(tensor, parts):
    """[B, ...] -> `parts` tensors of B // parts or B // parts + 1 rows."""
    batch = tf.shape(tensor)[0]
    sizes = batch // parts + tf.cast(tf.range(parts) < batch % parts, tf.int32)
    return tf.split(tensor, sizes, num=parts, axis=0)
