"""The key/value caches of decoding (section 3.2.3's masked self-attention
one position at a time): growing, fixed-size and in-place.

A growing cache ([B, N, L, H], L = 0 at first) is appended to by each
call; a fixed-size one ([B, N, L, H]) is written at `cache_index` by a
scatter (static shapes, for XLA); an in-place one ([B, L, N, H]) is written
in its own buffer and read through the rows of `in_place_cache_rows`, so a
beam search never copies or reorders it. `MultiHeadAttention` reads and
writes them; `initial_cache` makes them.

Shape legend: B batch, T query length, S key length, L cache length,
N heads (h), H head width (d_k or d_v).
"""

import tensorflow as tf
from keras import ops


def empty_cache(batch_size, max_length, num_heads, widths, dtype, in_place):
    """The cache of `MultiHeadAttention.initial_cache`.

    Args:
        batch_size: B.
        max_length: L, or None for a growing cache.
        num_heads: N.
        widths: `(H_k, H_v)`.
        dtype: the keys' and values' dtype.
        in_place: whether the cache is written in place (needs L).

    Returns:
        dict of "key" and "value": zeros [B, N, L, H] (L = 0 when growing),
        or, in place, uninitialised [B, L, N, H].

    Raises:
        ValueError: if `in_place` is asked without `max_length`.
    """
    names = ("key", "value")
    if in_place:
        if max_length is None:
            raise ValueError(
                "An in-place cache needs `max_length`, the positions it "
                "holds. Pass the decoding loop's length."
            )
        # `Empty` is never merged with another op by Grappler (unlike
        # zeros), so every cache owns its buffer; uninitialised, its
        # pages are touched only as steps write them.
        return {
            name: tf.raw_ops.Empty(
                shape=tf.stack([batch_size, max_length, num_heads, width]),
                dtype=tf.as_dtype(dtype),
            )
            for name, width in zip(names, widths)
        }
    shape = (batch_size, num_heads, 0 if max_length is None else max_length)
    return {
        name: ops.zeros((*shape, width), dtype=dtype)
        for name, width in zip(names, widths)
    }


def write_step(cache, step, index):
    """The cache [B, N, L, H] with `step` [B, N, T, H] at positions `index`
    to `index + T - 1` (a decoding step, T = 1, or a chunk of positions).

    A scatter of the B * N * T new rows rather than a select over all L
    positions: it reads the cache once (a copy) instead of twice plus a
    mask, and XLA turns it into an in-place dynamic-update-slice.
    """
    batch, heads, steps = tf.shape(step)[0], step.shape[1], tf.shape(step)[2]
    rows, columns, positions = tf.meshgrid(
        tf.range(batch),
        tf.range(heads),
        tf.cast(index, tf.int32) + tf.range(steps),
        indexing="ij",
    )
    indices = tf.stack([rows, columns, positions], axis=-1)  # [B, N, T, 3]
    return tf.tensor_scatter_nd_update(cache, indices, step)


def check_cache_positions(query, cache, cache_index, in_place):
    """Raises a ValueError, rather than a scatter's or gather's error from
    inside TensorFlow, when the query's positions from `cache_index` on do
    not fit in a fixed-size or in-place cache (checked where the values are
    known: a Python or eager index; in a graph loop the loop bounds them),
    or when an in-place cache is given more than one position."""
    steps = query.shape[1]
    if in_place and steps is not None and steps != 1:
        raise ValueError(
            "An in-place cache takes one query position per call (a decoding "
            "step). Use a fixed-size cache (`initial_cache(batch_size, "
            "max_length)`) for several positions at once. Received: query of "
            f"shape {tuple(query.shape)}"
        )
    index = tf.get_static_value(cache_index)
    length = cache["key"].shape[1 if in_place else 2]
    if index is None or steps is None:
        return
    if index < 0 or (length is not None and index + steps > length):
        raise ValueError(
            f"`cache_index` {index} with {steps} query position(s) does not "
            f"fit in the cache's {length} positions: it must be in [0, "
            f"{length} - T]. Build the cache with a larger `max_length`."
        )


def write_in_place(cache, step, index):
    """The cache [B, L, N, H] of `initial_cache(in_place=True)` with `step`
    [B, N, 1, H] written at position `index`, in the cache's own buffer.

    `InplaceUpdate` modifies its input: a step writes only its own rows,
    at any length, where appending copies every position decoded so far.
    That is safe because each in-place cache is its own `Empty` buffer,
    read only through this function's output.
    """
    batch, length = tf.shape(cache)[0], tf.shape(cache)[1]
    width = cache.shape[2] * cache.shape[3]
    rows = tf.range(batch) * length + tf.cast(index, tf.int32)
    flat = tf.raw_ops.InplaceUpdate(
        x=tf.reshape(cache, [-1, width]),
        i=rows,
        v=tf.reshape(step, [-1, width]),
    )
    return tf.reshape(flat, tf.shape(cache))


def read_rows(cache, rows):
    """[B, N, S, H] of an in-place cache [B, L, N, H] at `rows` [B, N, S]."""
    return tf.gather(tf.reshape(cache, [-1, cache.shape[-1]]), rows)


def in_place_cache_rows(ancestry, index, num_heads):
    """What the queries at position `index` read of in-place caches.

    In beam search the hypotheses change rows (slots) from step to step.
    In-place caches are never reordered: position j of a hypothesis stays
    in the slot that decoded it, and `ancestry` says which slot that is.

    Args:
        ancestry: int32 [B, L]: `ancestry[b, j]` is the slot of the caches
            holding position j of the hypothesis in slot b, for j < `index`
            (beam search reorders it with the hypotheses).
        index: int32 scalar, the position being decoded.
        num_heads: N.

    Returns:
        `(ancestry, rows)`: the ancestry with each slot's own position
        `index` recorded, and int32 rows [B, N, index + 1] of the caches
        flattened to [B * L * N, H], for `call(cache_rows=...)`.
    """
    batch, length = tf.shape(ancestry)[0], tf.shape(ancestry)[1]
    own = tf.one_hot(index, length, on_value=True, off_value=False)[None, :]
    ancestry = tf.where(own, tf.range(batch)[:, None], ancestry)
    positions = tf.range(index + 1)
    cells = ancestry[:, : index + 1] * length + positions  # [B, index + 1]
    rows = cells[:, None, :] * num_heads + tf.range(num_heads)[None, :, None]
    return ancestry, rows


def cache_shape_invariants(cache):
    """`tf.while_loop` shape invariants for growing caches.

    Args:
        cache: a nest of [B, N, L, H] cache tensors (`initial_cache` with
            `max_length=None`).

    Returns:
        The nest of `tf.TensorShape`s [None, N, None, H]: the batch and
        length axes may change from step to step.
    """
    return tf.nest.map_structure(
        lambda x: tf.TensorShape([None, x.shape[1], None, *x.shape[3:]]), cache
    )
