"""The outputs of the attention layers' calls: the output, then the
attention weights when asked for, then the updated cache when one was given
(`keras.layers.MultiHeadAttention` also returns its weights second)."""


def pack_outputs(outputs, weights=None, cache=None):
    """`outputs` alone, or a tuple of it and those of `weights` and `cache`
    that are not None."""
    extras = tuple(part for part in (weights, cache) if part is not None)
    return (outputs, *extras) if extras else outputs


def unpack_outputs(results, with_weights, with_cache):
    """`(outputs, weights, cache)` of a `pack_outputs` result, None for the
    parts it does not have: the weights when `with_weights`, the cache when
    `with_cache`."""
    results = results if isinstance(results, tuple) else (results,)
    expected = 1 + bool(with_weights) + bool(with_cache)
    if len(results) != expected:
        raise ValueError(
            f"Expected {expected} outputs (with_weights={with_weights}, "
            f"with_cache={with_cache}). Received: {len(results)} outputs"
        )
    weights = results[1] if with_weights else None
    return results[0], weights, results[-1] if with_cache else None
