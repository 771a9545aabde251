"""The decoding loop that beam search and greedy search share: output
limits, the top-k of a step's logits, and a `tf.while_loop` over the steps
that keeps the state's shapes and runs on TensorFlow's single-threaded
executor."""

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

# A finite "minus infinity": -inf would give NaN in `-inf - -inf` and
# `0 * -inf`. Log-probabilities are clamped to it, and a hypothesis whose
# log-probability is below NEG_INF / 2 is invalid (a filler beam or a token
# the model gave -inf).
NEG_INF = -1e9


def decode_limits(max_decode_length, batch_size):
    """Per-sentence output limits and the loop length.

    Args:
        max_decode_length: int scalar or [B], tokens generated including EOS.
        batch_size: B, int or int32 scalar tensor.

    Returns:
        (limits int32 [B], loop length: a Python int when `max_decode_length`
        is known while tracing, otherwise an int32 scalar tensor).

    Raises:
        TypeError: if `max_decode_length` is not of integers.
        ValueError: if `max_decode_length` is not a scalar or a vector, is
            negative, or (where B is known while tracing) is a vector of
            another length than 1 or B.
    """
    limits = tf.cast(
        integer_tensor("max_decode_length", max_decode_length), tf.int32
    )
    if limits.shape.rank not in (0, 1):
        raise ValueError(
            "`max_decode_length` must be a scalar or a [batch] vector. "
            f"Received: max_decode_length.shape={limits.shape}"
        )
    batch = tf.get_static_value(batch_size)
    # Otherwise a broadcast error from inside TensorFlow.
    length = limits.shape[0] if limits.shape.rank == 1 else None
    if batch is not None and length not in (None, 1, batch):
        raise ValueError(
            "`max_decode_length` must be a scalar or have one limit per "
            f"sentence. Received: max_decode_length.shape={limits.shape}, "
            f"batch_size={batch}"
        )
    known = tf.get_static_value(limits)
    if known is not None and np.any(known < 0):
        raise ValueError(
            "`max_decode_length` must be non-negative. "
            f"Received: max_decode_length={known.tolist()}"
        )
    if known is not None:
        loop_length = int(np.max(known, initial=0))
    else:
        loop_length = tf.maximum(tf.reduce_max(limits), 0)
    return tf.broadcast_to(limits, [batch_size]), loop_length


# The two-stage `top_k` runs from this many columns per kept token.
TOP_K_TWO_STAGE_WIDTH = 512


def _block_width(width, k):
    """Columns per block of the two-stage `top_k`: a divisor of `width`
    near sqrt(width / k), which minimises the stages' V / b + k * b values
    (blocks of a divisor need no padding, a copy of the whole matrix);
    without one, sqrt(width / k) itself."""
    target = max(1, round((width / k) ** 0.5))
    divisors = [
        size for size in range(target // 2, 2 * target + 1) if width % size == 0
    ]
    return min(divisors, key=lambda size: abs(size - target), default=target)


def top_k(values, k):
    """`tf.math.top_k` over the last axis of [rows, V], in two cheap stages.

    TensorFlow's CPU TopK takes ~17 ms on [128, 32000] at k = 8 (one
    thread), a large part of a base-model beam-search step. The k largest
    values lie in the k blocks of columns with the largest maxima (any
    other block's maximum is below k values), so a max per block, a top-k
    over the block maxima and one over the chosen k blocks give the same
    values and ids, ties to the lower index as `tf.math.top_k` does, in
    ~2 ms.

    Args:
        values: [rows, V], V known while tracing for the two stages.
        k: a Python int <= V.

    Returns:
        (values [rows, k], ids int32 [rows, k]), largest first.
    """
    width = values.shape[-1]
    if width is None or width < TOP_K_TWO_STAGE_WIDTH * k:
        return tf.math.top_k(values, k)
    block_width = _block_width(width, k)
    num_blocks = -(-width // block_width)
    if num_blocks * block_width != width:
        # -inf padding ties with -inf values, and ties go to the lower index.
        values = tf.pad(
            values,
            [[0, 0], [0, num_blocks * block_width - width]],
            constant_values=float("-inf"),
        )
    blocks = tf.reshape(values, [-1, num_blocks, block_width])
    _, best_blocks = tf.math.top_k(
        tf.reduce_max(blocks, axis=-1), k
    )  # [rows, k]
    # Kept in block-index order, so that ties keep going to the lower index.
    best_blocks = tf.sort(best_blocks, axis=-1)
    candidates = tf.gather(
        blocks, best_blocks, batch_dims=1
    )  # [rows, k, block]
    top_values, index = tf.math.top_k(
        tf.reshape(candidates, [-1, k * block_width]), k
    )
    block = tf.gather(best_blocks, index // block_width, batch_dims=1)
    return top_values, block * block_width + index % block_width


def top_log_probs(logits, k, vocab_size=None):
    """The k most probable tokens of each row and their log-probabilities.

    Ranks the logits and normalises only the k chosen ones. The normaliser
    log sum(exp(logits)) is the best logit minus the log of its softmax
    probability (>= 1 / V, so its log is accurate): the fused softmax kernel
    takes ~0.4 of the time of a logsumexp of separate ops over [128, 32000]
    on CPU. Log-probabilities are clamped to NEG_INF, so -inf logits stay
    finite.

    Args:
        logits: [rows, V] from the logits function, any float dtype.
        k: tokens kept per row, a Python int <= V.
        vocab_size: expected V, or None to accept any.

    Returns:
        (log_probs float32 [rows, k], ids int32 [rows, k]), best first.

    Raises:
        ValueError: if the logits are not a [rows, vocab_size] matrix.
    """
    if logits.shape.rank != 2 or (
        vocab_size is not None
        and logits.shape[-1] is not None
        and logits.shape[-1] != vocab_size
    ):
        columns = (
            "vocab_size" if vocab_size is None else f"vocab_size={vocab_size}"
        )
        raise ValueError(
            f"The logits function must return logits of shape [rows, "
            f"{columns}] for the current position only. "
            f"Received: logits.shape={logits.shape}"
        )
    logits = tf.cast(logits, tf.float32)
    top_logits, ids = top_k(logits, k)
    best_prob = tf.gather(tf.nn.softmax(logits), ids, batch_dims=1)[:, :1]
    # A max of the k, not top_logits[:, :1]: a slice of its own would stop
    # XLA from turning the sort of its top-k into a partial top-k.
    best_logit = tf.reduce_max(top_logits, axis=-1, keepdims=True)
    log_norm = best_logit - tf.math.log(best_prob)  # [rows, 1]
    return tf.maximum(top_logits - log_norm, NEG_INF), ids


def state_invariants(state, shape_invariants=None):
    """The `tf.while_loop` shape invariants of a [batch, ...] state nest.

    Args:
        state: nest of tensors.
        shape_invariants: None (every shape is fixed) or a nest of
            `tf.TensorShape`s like `state`, None where an axis may change
            (growing caches); their batch axis is ignored.

    Returns:
        A nest of `tf.TensorShape`s: the state's own shapes, or the
        invariants with an unknown batch axis.
    """
    if shape_invariants is None:
        return tf.nest.map_structure(lambda x: x.shape, state)
    tf.nest.assert_same_structure(state, shape_invariants)
    return tf.nest.map_structure(
        lambda shape: tf.TensorShape([None]).concatenate(
            tf.TensorShape(shape)[1:]
        ),
        shape_invariants,
    )


def keep_shapes(new_state, invariants):
    """Restores static shapes `tf.while_loop` needs (Keras may lose them).

    Args:
        new_state: the state the logits function returned.
        invariants: nest of `tf.TensorShape`s (see `state_invariants`).

    Raises:
        ValueError: if a tensor of the state changed a fixed axis.
    """
    tf.nest.assert_same_structure(invariants, new_state)

    def keep(new, shape):
        if not new.shape.is_compatible_with(shape):
            raise ValueError(
                "The logits function must return a state whose tensors keep "
                "their shapes (write fixed-size caches in place), except "
                "along the axes `state_shape_invariants` leaves free "
                "(growing caches). Received: "
                f"expected shape={shape}, new shape={new.shape}"
            )
        return new if new.shape == shape else tf.ensure_shape(new, shape)

    return tf.nest.map_structure(keep, new_state, invariants)


def integer_tensor(name, value):
    """`value` as a tensor of integers; a TypeError naming `name` for other
    values (TensorFlow cannot cast strings, and would truncate floats)."""
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError):
        tensor = None
    if tensor is None or not tensor.dtype.is_integer:
        raise TypeError(
            f"`{name}` must be an integer or a tensor of integers. "
            f"Received: {name}={value!r}"
        )
    return tensor


# TensorFlow's executor for a function's ops one after another on the calling
# thread (`tensorflow/core/common_runtime/single_threaded_executor.cc`).
SINGLE_THREADED_EXECUTOR = "SINGLE_THREADED_EXECUTOR"


def decoding_loop(cond, body, loop_vars, shape_invariants):
    """`tf.while_loop` whose steps run on TensorFlow's single-threaded executor.

    A decoding step is ~200 small ops in a chain. TensorFlow lowers a
    `While` inside a `tf.function` to dataflow (`Switch`/`Merge`) run by
    its default executor, which spends a few microseconds scheduling each
    op (~3 us here: ~5 % of a small model's decoding call). Kept as a
    functional `While` whose cond and body functions name the
    single-threaded executor (their `_executor` attribute), each iteration
    runs its ops in order on the loop's own thread; every op still uses the
    intra-op thread pool. Only the side-by-side running of independent ops
    within one step is given up, and the parallel searches of `Translator`
    keep both cores busy instead. Same ops, same results. Grappler does not
    optimize a functional `While`'s body, so its fusions (a projection's
    bias add into its matmul) are not made there; they are worth under 1 %
    of a step, and a nested function call that Grappler would optimize
    costs more (benchmarks/PERFORMANCE.md, Levers).

    Eagerly or under XLA (which compiles the loop) it is `tf.while_loop`.

    Args:
        cond, body, loop_vars, shape_invariants: as `tf.while_loop`.

    Returns:
        The loop variables after the last step, as `tf.while_loop`.
    """
    outputs = tf.while_loop(
        cond, body, loop_vars, shape_invariants=shape_invariants
    )
    if tf.executing_eagerly():
        return outputs
    loop = tf.nest.flatten(outputs)[0].op
    try:
        lowered = loop.get_attr("_lower_using_switch_merge")
    except ValueError:  # Not set: in an XLA context, which compiles the loop.
        lowered = False
    if loop.type in ("While", "StatelessWhile") and lowered:
        # Private `_set_attr`: `tf.while_loop` has no argument for either.
        loop._set_attr(
            "_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False)
        )
        for name in ("cond", "body"):
            function = loop.get_attr(name)
            function.attr["_executor"].s = SINGLE_THREADED_EXECUTOR.encode()
            loop._set_attr(name, attr_value_pb2.AttrValue(func=function))
    return outputs


def loop_shape_invariants(loop_vars, state_index, invariants):
    """The loop variables' own shapes, with `invariants` for the state."""
    shapes = [tf.nest.map_structure(lambda x: x.shape, v) for v in loop_vars]
    shapes[state_index] = invariants
    return tuple(shapes)
