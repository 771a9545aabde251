"""Scaled dot-product and multi-head attention (section 3.2) with a K/V cache.

Shape legend: B batch, T query length, S key length, L cache length,
N heads (h), H head width (d_k or d_v), D model width.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.checks import check_bool, check_positive_int, check_rate
from keras_transformer.layers import attention_cache, masks
from keras_transformer.layers.checks import (
    check_built,
    check_sentence_mask,
    check_sequence_shape,
    check_static_dim,
)
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.initializers import initializer_copy
from keras_transformer.layers.outputs import pack_outputs
from keras_transformer.layers.projection import (
    decoding_projection,
    project,
    project_parts,
)

# Added to masked scores before the softmax; large enough to zero them in
# float32, small enough not to overflow to -inf (no NaN for an all-masked row).
_MASK_VALUE = -1e9


def _batch_matmul(x, y, adjoint_b=False, tiny=False):
    """`tf.matmul` of [..., M, K] x [..., K, N] (y as [..., N, K] with
    `adjoint_b`); `tiny` runs it as Eigen's `BatchMatMulV3`.

    At a decoding step the batch holds hundreds of products of one to K
    query rows, and oneDNN's batch matmul (which TensorFlow's oneDNN pass
    puts in place of `BatchMatMulV2`, not of a float `BatchMatMulV3`) spends
    more on setting up each call than on the products: ~110 vs ~90 us for
    the scores and values of a small model's cross-attention step, one
    thread. At training sizes oneDNN's is ~1.7x faster, so only `tiny`
    float32 products leave it (the CPU has no float16 `BatchMatMulV3`).
    The values are the same.
    """
    if not tiny or x.dtype != tf.float32:
        return tf.matmul(x, y, adjoint_b=adjoint_b)
    return tf.raw_ops.BatchMatMulV3(x=x, y=y, adj_y=adjoint_b, Tout=x.dtype)


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    dropout=None,
    training=None,
    decoding_step=False,
):
    """Eq. 1: softmax(Q K^T / sqrt(d_k)) V, per head.

    Args:
        query: [B, N, T, H_k].
        key: [B, N, S, H_k].
        value: [B, N, S, H_v].
        mask: bool, broadcastable to [B, N, T, S]; True = may attend.
        dropout: optional dropout layer applied to the attention weights.
        training: passed to `dropout`.
        decoding_step: whether the queries are one decoding step (T is 1, or
            the few beams of a sentence grouped over its memory): the
            matmuls are then many tiny ones, run by a kernel suited to them.

    Returns:
        (outputs [B, N, T, H_v], weights [B, N, T, S] in float32, or
        float64 for float64 inputs).
    """
    # Scale the queries, not the [T, S] scores: T * H_k multiplies, not T * S.
    query = query * ops.cast(query.shape[-1] ** -0.5, query.dtype)
    scores = _batch_matmul(query, key, adjoint_b=True, tiny=decoding_step)
    # The softmax runs in float32, also under mixed precision (in float64
    # under a float64 policy).
    scores = ops.cast(
        scores, keras.backend.result_type(scores.dtype, "float32")
    )
    if mask is not None:
        scores = ops.where(mask, scores, _MASK_VALUE)
    # TensorFlow's, as Keras's own would be: `ops.softmax` warns of a key
    # axis of size 1, which the first step of a growing cache has.
    weights = tf.nn.softmax(scores, axis=-1)
    attended = ops.cast(weights, value.dtype)
    if dropout is not None:
        attended = dropout(attended, training=training)
    return _batch_matmul(attended, value, tiny=decoding_step), weights


def _swap_heads_and_positions(x):
    """[B, T, N, H] <-> [B, N, T, H] (axes 1 and 2 swapped).

    As an Einsum, not a Transpose: on CPU, oneDNN's transpose takes ~70 us
    on a [32, 4, 4, 64] tensor (the grouped beam queries), the Einsum
    kernel ~5 us; ~1.5x faster at training sizes. With a single position or
    head it is a reshape (no copy).
    """
    if x.shape[1] == 1 or x.shape[2] == 1:
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[2], shape[1], shape[3]))
    return ops.einsum("abcd->acbd", x)


def _group_queries(query, memory_batch):
    """[B * G, N, 1, H] -> [B, N, G, H]: the G queries of each memory row.

    In beam search the G = K hypotheses of a sentence attend over the same
    encoder output. As the T axis of one attention they read its projected
    keys/values once, untiled, instead of once per hypothesis (G times the
    memory traffic in matmuls of a single row). With G = 1 it is a reshape.
    """
    heads, width = query.shape[1], query.shape[3]
    query = ops.reshape(query, (memory_batch, -1, heads, width))  # [B, G, N, H]
    return _swap_heads_and_positions(query)


def _check_grouped_batches(query, key, attention_mask):
    """Raises a ValueError, where the sizes are known, unless the query
    batch is a multiple of the projected memory's (G queries of each memory
    row, consecutive) and a [B, 1, S] mask is of the memory's batch (as the
    docstring says), rather than a reshape's error inside TensorFlow."""
    queries, rows = query.shape[0], key.shape[0]
    if None not in (queries, rows) and queries % rows:
        raise ValueError(
            "With projected memory, the query batch must be a multiple G of "
            "the memory batch: the G queries (beams) of each memory row, "
            f"consecutive. Received: query of shape {tuple(query.shape)}, "
            f"memory keys of shape {tuple(key.shape)}"
        )
    if attention_mask is not None and len(attention_mask.shape) >= 3:
        check_static_dim(
            "attention_mask", attention_mask, 0, "memory['key']", key, 0
        )


def _ungroup(weights):
    """[B, N, G, S] -> [B * G, N, 1, S], the inverse of `_group_queries`."""
    weights = _swap_heads_and_positions(weights)  # [B, G, N, S]
    return ops.reshape(weights, (-1, weights.shape[2], 1, weights.shape[3]))


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention of section 3.2.2, with padding/causal masks.

    Projections run as single 2-D matmuls ([B * T, D] x [D, N * H]); the three
    self-attention projections are fused into one. For incremental decoding,
    cross-attention reuses encoder keys/values projected once by
    `project_memory`, and self-attention keeps a key/value cache that is
    fixed-size, written at `cache_index` (static shapes, for XLA); growing,
    the step appended (without XLA it copies only the positions decoded so
    far, not the whole fixed length, at every step); or in place, written
    into its own buffer at `cache_index` and read at `cache_rows` (beam
    search without XLA: the cache is never copied or reordered). At a
    decoding step (one query position) the per-head products are many tiny
    ones and run as such (see `scaled_dot_product_attention`).

    Called as `(query, memory=None, attention_mask=None, ...)`, unlike
    `keras.layers.MultiHeadAttention`'s `(query, value, key)`: the memory
    gives both keys and values, and a third positional tensor is the mask.

    Args:
        num_heads: h, number of heads.
        key_dim: d_k, query/key width per head.
        value_dim: d_v, value width per head. Defaults to `key_dim`.
        output_dim: width of the output. Defaults to the query width.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases (Keras's default;
            the paper's have none, section 3.2.2).
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the biases.
        **kwargs: base layer keyword arguments.

    Call arguments:
        query: [B, T, D] queries. Its Keras mask [B, T] (e.g. of
            `keras.layers.Embedding(mask_zero=True)`), if any, masks the
            keys of self-attention, as in Keras's `MultiHeadAttention`, and
            carries over to the outputs.
        memory: [B, S, D] keys/values for cross-attention (its Keras mask
            [B, S], if any, masks them), or their
            projection once by `project_memory(memory)`; None for
            self-attention. With projected memory and one query step
            (T = 1), the query batch may be G times the memory batch: G
            consecutive queries (the beams of a sentence) per memory row.
        attention_mask: bool (or 0/1) broadcastable to [B, T, S], True =
            attend (e.g. `masks.padding_mask(ids)` of shape [B, 1, S], or
            `masks.causal_mask(T, S)` of shape [T, S]: a 2-D mask is
            [T, S], the same for every sentence; a [B, S] padding mask
            needs its query axis, [B, 1, S]); with grouped queries, of the
            memory batch.
        use_causal_mask: mask future positions (decoder self-attention).
        cache: self-attention cache from `initial_cache`: dict of "key"
            [B, N, L, H_k] and "value" [B, N, L, H_v] of the positions before
            the query's ([B, L, N, H] in place).
        cache_index: int32 scalar, the position of the query in a
            fixed-size cache (its T positions are written from there on)
            or in an in-place cache (T = 1); None appends the query's keys
            and values to a growing cache.
        cache_rows: with an in-place cache, the rows [B, N, S] the query
            attends, of `in_place_cache_rows`.
        return_attention_weights: also return the weights [B, N, T, S]
            (float32, also under mixed precision; float64 under a float64
            policy).
        training: enables dropout.
        decoding_weights: optional `decoding_weights()` of this layer,
            computed once per decoding call, used instead of its own
            weights (the output is the same).

    Returns:
        outputs [B, T, output_dim]; with `return_attention_weights`, also the
        weights; with a self-attention cache, also the updated cache, in the
        order `(outputs, weights, cache)`.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.key_dim = check_positive_int("key_dim", key_dim)
        if value_dim is not None:
            value_dim = check_positive_int("value_dim", value_dim)
        self.value_dim = self.key_dim if value_dim is None else value_dim
        if output_dim is not None:
            output_dim = check_positive_int("output_dim", output_dim)
        self.output_dim = output_dim
        dropout = check_rate("dropout", dropout)
        self.dropout = dropout
        self.use_bias = check_bool("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout_layer = Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )
        self._attention_weights_dropout = (
            self.dropout_layer if dropout else None
        )
        # One output per query position: the query's Keras mask carries over.
        self.supports_masking = True

    def build(self, query_shape, memory_shape=None):
        check_sequence_shape("MultiHeadAttention", "query", query_shape)
        if memory_shape is not None:
            check_sequence_shape("MultiHeadAttention", "memory", memory_shape)
        query_width = query_shape[-1]
        memory_width = (memory_shape or query_shape)[-1]
        output_dim = self.output_dim or query_width
        n = self.num_heads
        widths = {
            "query": (query_width, n * self.key_dim),
            "key": (memory_width, n * self.key_dim),
            "value": (memory_width, n * self.value_dim),
            "output": (n * self.value_dim, output_dim),
        }
        for index, (name, (in_width, out_width)) in enumerate(widths.items()):
            kernel = self.add_weight(
                name=f"{name}_kernel",
                shape=(in_width, out_width),
                # Each kernel its own draw (`initializers.py`).
                initializer=initializer_copy(self.kernel_initializer, index),
            )
            bias = None
            if self.use_bias:
                bias = self.add_weight(
                    name=f"{name}_bias",
                    shape=(out_width,),
                    initializer=initializer_copy(self.bias_initializer, index),
                )
            setattr(self, f"{name}_kernel", kernel)
            setattr(self, f"{name}_bias", bias)
        self.built = True

    def _project(self, inputs, kernels, biases, training=None, fused=None):
        """2-D matmuls for several projections: [B, L, D] -> list of
        [B, N, L, H], one per kernel; by `fused`, the `(kernel, bias)` of
        `decoding_weights`, when given."""
        widths = [kernel.shape[-1] for kernel in kernels]
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        flat_inputs = ops.reshape(inputs, (-1, inputs.shape[-1]))
        if fused is not None:
            parts = project_parts(flat_inputs, *fused, widths)
        elif len(kernels) == 1 or inputs.shape[1] == 1:
            # A single kernel, or one decoding step: its few rows make
            # concatenating the kernels (a copy of all of them, each step)
            # cost more than separate matmuls.
            parts = [
                project(flat_inputs, kernel, bias, training)
                for kernel, bias in zip(kernels, biases)
            ]
        else:
            # One matmul for the fused projections of a sequence.
            flat = project(
                flat_inputs,
                ops.concatenate(kernels, axis=-1),
                ops.concatenate(biases, 0) if self.use_bias else None,
                training,
            )
            # A split, not slices: its gradient is one concatenation, while
            # each slice's gradient pads a full-width zero tensor.
            parts = tf.split(flat, widths, axis=-1)
        outputs = []
        for part, width in zip(parts, widths):
            # [B * L, N * H] -> [B, L, N, H] -> [B, N, L, H]
            part = ops.reshape(
                part, (batch, length, self.num_heads, width // self.num_heads)
            )
            outputs.append(_swap_heads_and_positions(part))
        return outputs

    def decoding_weights(self, cross_attention=False):
        """Projection weights for `call(decoding_weights=...)` at decoding
        steps, computed once per decoding call.

        The projections of the query (query, key and value in
        self-attention; the query alone in cross-attention, whose keys and
        values come from `project_memory`) fused into one kernel, and the
        output kernel, each with the zero columns of
        `projection.aliasing_padding` (a step's few rows multiply kernels
        whose rows span a multiple of 2 KiB, d_model = 512 in float32, at
        ~2/3 speed).

        Args:
            cross_attention: whether the layer attends over projected memory.

        Returns:
            dict of "inputs" and "output", each `(kernel, bias)` of
            `projection.decoding_projection` in the compute dtype.
        """
        check_built(self, "decoding_weights")
        names = ("query",) if cross_attention else ("query", "key", "value")
        inputs = decoding_projection(
            [getattr(self, f"{name}_kernel") for name in names],
            [getattr(self, f"{name}_bias") for name in names],
            self.compute_dtype,
        )
        output = decoding_projection(
            [self.output_kernel], [self.output_bias], self.compute_dtype
        )
        return {"inputs": inputs, "output": output}

    def project_memory(self, memory):
        """Projects encoder outputs once for cross-attention decoding.

        Args:
            memory: [B, S, D] encoder outputs.

        Returns:
            dict of "key" [B, N, S, H_k] and "value" [B, N, S, H_v].
        """
        check_built(self, "project_memory")
        # Called outside `__call__`, whose autocast scope would otherwise
        # read the kernels in the compute dtype (a no-op in float32).
        dtype = self.compute_dtype
        key, value = self._project(
            ops.cast(memory, dtype),
            [
                ops.cast(self.key_kernel, dtype),
                ops.cast(self.value_kernel, dtype),
            ],
            [
                None if bias is None else ops.cast(bias, dtype)
                for bias in (self.key_bias, self.value_bias)
            ],
        )
        return {"key": key, "value": value}

    def initial_cache(
        self, batch_size, max_length=None, dtype=None, in_place=False
    ):
        """An empty self-attention cache.

        Args:
            batch_size: B.
            max_length: L, the positions of a fixed-size cache that calls
                write at `cache_index`; None for a growing cache (L = 0
                at first, call without `cache_index`).
            dtype: the cache's dtype; defaults to the layer's compute
                dtype (the dtype of the keys and values a call writes).
            in_place: with `max_length`, a cache that calls write in place
                at `cache_index` and read at `cache_rows`: for one
                `tf.while_loop` that passes it from step to step and
                nothing else (a write modifies the buffer).

        Returns:
            dict of "key" [B, N, L, H_k] and "value" [B, N, L, H_v] zeros;
            in place, [B, L, N, H_k] and [B, L, N, H_v], uninitialised
            (positions are read only once written).

        Raises:
            ValueError: if `in_place` is asked without `max_length`.
        """
        return attention_cache.empty_cache(
            batch_size,
            max_length,
            self.num_heads,
            (self.key_dim, self.value_dim),
            self.compute_dtype if dtype is None else dtype,
            in_place,
        )

    def call(
        self,
        query,
        memory=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        cache_rows=None,
        return_attention_weights=False,
        training=None,
        decoding_weights=None,
    ):
        # Static widths only (free in the decoding step): a TensorFlow
        # matmul error otherwise.
        _check_built_width("query", query, self.query_kernel)
        if memory is not None and not isinstance(memory, dict):
            _check_built_width("memory", memory, self.key_kernel)
        fused = None if decoding_weights is None else decoding_weights["inputs"]
        new_cache = None
        query_start = 0
        grouped = False
        if isinstance(memory, dict):
            # Cross-attention with keys/values projected once.
            (q,) = self._project(
                query, [self.query_kernel], [self.query_bias], training, fused
            )
            key, value = memory["key"], memory["value"]
            grouped = query.shape[1] == 1
            if grouped:
                _check_grouped_batches(query, key, attention_mask)
                q = _group_queries(q, ops.shape(key)[0])
        elif memory is None:
            q, key, value = self._project(
                query,
                [self.query_kernel, self.key_kernel, self.value_kernel],
                [self.query_bias, self.key_bias, self.value_bias],
                training,
                fused,
            )
            if cache is not None and cache_index is not None:
                attention_cache.check_cache_positions(
                    query, cache, cache_index, in_place=cache_rows is not None
                )
            if cache_rows is not None:
                new_cache = {
                    "key": attention_cache.write_in_place(
                        cache["key"], key, cache_index
                    ),
                    "value": attention_cache.write_in_place(
                        cache["value"], value, cache_index
                    ),
                }
                # The rows hold the query's own position and its ancestors'
                # (T = 1): nothing to mask.
                key = attention_cache.read_rows(new_cache["key"], cache_rows)
                value = attention_cache.read_rows(
                    new_cache["value"], cache_rows
                )
                use_causal_mask = False
            elif cache is not None and cache_index is None:
                query_start = ops.shape(cache["key"])[2]
                key = ops.concatenate([cache["key"], key], axis=2)
                value = ops.concatenate([cache["value"], value], axis=2)
                new_cache = {"key": key, "value": value}
                # A single query comes after every cached position.
                use_causal_mask = query.shape[1] != 1
            elif cache is not None:
                key = attention_cache.write_step(cache["key"], key, cache_index)
                value = attention_cache.write_step(
                    cache["value"], value, cache_index
                )
                new_cache = {"key": key, "value": value}
                query_start = cache_index
                use_causal_mask = True  # The unwritten positions.
        else:
            check_static_dim("memory", memory, 0, "query", query, 0)
            (q,) = self._project(
                query, [self.query_kernel], [self.query_bias], training
            )
            key, value = self._project(
                memory,
                [self.key_kernel, self.value_kernel],
                [self.key_bias, self.value_bias],
                training,
            )

        mask = None
        keys = ("query", query) if memory is None else ("memory", memory)
        if attention_mask is not None:
            if cache is None and not isinstance(memory, dict):
                # [B, T, S], [B, N, T, S] or [T, S]: the last axis is the
                # keys' positions, the one before it the queries'.
                rank = len(attention_mask.shape)
                check_static_dim("attention_mask", attention_mask, -1, *keys, 1)
                if rank >= 2:
                    check_static_dim(
                        "attention_mask", attention_mask, -2, "query", query, 1
                    )
                if rank >= 3:
                    check_static_dim(
                        "attention_mask", attention_mask, 0, "query", query, 0
                    )
            mask = ops.cast(attention_mask, "bool")
            if len(mask.shape) == 3:
                mask = ops.expand_dims(mask, axis=1)  # [B, 1, T, S]
            # A [T, S] or [S] mask broadcasts over the batch and heads as it
            # is; its axis 1 is not a batch axis to give heads.
        if cache is None and not isinstance(memory, dict):
            # The Keras mask [B, S] of the keys' tensor (after
            # `Embedding(mask_zero=True)`, say), as Keras's own
            # MultiHeadAttention reads it: padded keys are not attended.
            keys_mask = masks.keras_mask(keys[1])
            if keys_mask is not None:
                name = f"{keys[0]}._keras_mask"  # [B, S]
                check_sentence_mask(name, keys_mask, *keys)
                mask = masks.merge_masks(
                    mask, ops.cast(keys_mask, "bool")[:, None, None, :]
                )
        if use_causal_mask:
            mask = masks.merge_masks(
                mask,
                masks.causal_mask(
                    ops.shape(q)[2], ops.shape(key)[2], query_start
                ),
            )
        attended, weights = scaled_dot_product_attention(
            q,
            key,
            value,
            mask,
            self._attention_weights_dropout,
            training,
            decoding_step=query.shape[1] == 1,
        )
        if grouped and return_attention_weights:
            weights = _ungroup(weights)
        # [B, N, T, H_v] -> [B, T, N, H_v] -> [B * T, N * H_v]; grouped:
        # [B, N, G, H_v] -> [B, G, N, H_v] -> [B * G, N * H_v], as well.
        attended = _swap_heads_and_positions(attended)
        batch, length = ops.shape(query)[0], ops.shape(query)[1]
        flat = ops.reshape(attended, (-1, self.num_heads * self.value_dim))
        if decoding_weights is None:
            outputs = project(
                flat, self.output_kernel, self.output_bias, training
            )
        else:
            (outputs,) = project_parts(
                flat,
                *decoding_weights["output"],
                [self.output_kernel.shape[-1]],
            )
        outputs = ops.reshape(outputs, (batch, length, outputs.shape[-1]))

        return pack_outputs(
            outputs, weights if return_attention_weights else None, new_cache
        )

    def compute_output_shape(self, query_shape, memory_shape=None):
        return (*query_shape[:-1], self.output_dim or query_shape[-1])

    def compute_output_spec(
        self,
        query,
        memory=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        cache_rows=None,
        return_attention_weights=False,
        training=None,
        decoding_weights=None,
    ):
        # Keras passes `compute_output_shape` the tensors' shapes only, not
        # the flags that decide which outputs `call` returns.
        outputs = keras.KerasTensor(
            self.compute_output_shape(query.shape), dtype=self.compute_dtype
        )
        new_cache = None
        if isinstance(memory, dict):
            keys = memory["key"].shape[2]
        elif memory is not None:
            keys = memory.shape[1]
        elif cache is None:
            keys = query.shape[1]
        elif cache_index is not None:
            # Fixed-size and in-place caches keep their shapes.
            keys = (
                cache["key"].shape[2]
                if cache_rows is None
                else cache_rows.shape[-1]
            )
            new_cache = {
                name: keras.KerasTensor(x.shape, dtype=x.dtype)
                for name, x in cache.items()
            }
        else:
            # A growing cache [B, N, L, H] gains the query's T positions.
            length, steps = cache["key"].shape[2], query.shape[1]
            keys = None if None in (length, steps) else length + steps
            new_cache = {
                name: keras.KerasTensor(
                    (*x.shape[:2], keys, x.shape[3]), x.dtype
                )
                for name, x in cache.items()
            }
        weights = None
        if return_attention_weights:
            shape = (query.shape[0], self.num_heads, query.shape[1], keys)
            weights = keras.KerasTensor(
                shape, keras.backend.result_type(self.compute_dtype, "float32")
            )
        return pack_outputs(outputs, weights, new_cache)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config


def _check_built_width(name, tensor, kernel):
    """Raises a ValueError naming `name` when `tensor`'s known width is not
    the input width of `kernel` (the one the layer was built for), and a
    TypeError when it is not a float tensor (Keras casts only floats to the
    compute dtype: integers would fail inside the projection's matmul)."""
    if not keras.backend.is_float_dtype(tensor.dtype):
        raise TypeError(
            f"MultiHeadAttention takes `{name}` as float vectors (an "
            "embedding's output, for token ids). Received: "
            f"{name} of dtype {keras.backend.standardize_dtype(tensor.dtype)}"
        )
    width, expected = tensor.shape[-1], kernel.shape[0]
    if width is not None and width != expected:
        raise ValueError(
            f"MultiHeadAttention was built for `{name}` of width {expected}; "
            "call it on inputs of that width, or use a new layer. "
            f"Received: {name} of shape {tuple(tensor.shape)}"
        )
