"""The encoder-decoder Transformer as a functional `keras.Model` (Fig. 1).

Shape legend: B batch, S source length, T target length, D d_model,
V vocabulary, L decoding cache length.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import layers
from keras_transformer.config import TransformerConfig
from keras_transformer.layers.attention_cache import in_place_cache_rows


class _StepMean(keras.metrics.Mean):
    """The loss tracker: the mean of the steps' losses.

    Keras weights each replica's share of a step's loss by its number of
    sentences, which token batching makes uneven across replicas: the
    logged loss then differs from the loss of the step (which
    `LabelSmoothedCrossEntropy` divides by the global batch's tokens).
    Unweighted, the replicas' shares of a step add up to its loss.
    """

    def update_state(self, values, sample_weight=None):
        del sample_weight  # Unweighted, as above.
        # A count of one that waits for the loss. A constant one would run
        # without it, so at the call where a dataset of unknown length runs
        # out (without XLA) it counted a step with no loss.
        with tf.control_dependencies([values]):
            one = tf.ones_like(values)
        super().update_state(values, sample_weight=one)


# The training step's settings beyond `compile`'s (see `train_step`), with
# their values for a model that `compile_for_training` did not compile.
_STEP_SETTINGS = {
    "gradient_accumulation_steps": 1,
    "replica_jit_compile": False,
}


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    """The paper's Transformer, built as a functional model from a config.

    The functional graph maps `{"source_ids", "target_ids"}` (int32 [B, S]
    and [B, T], 0 = padding, target ids shifted right with BOS first) to
    float32 logits [B, T, V], so `model.fit` trains it with teacher forcing.
    The methods `encode`, `decode`, `initial_decoding_state` and
    `decode_step` reuse the same layers for inference, one step at a time
    with key/value caches.

    Args:
        config: a `TransformerConfig`, or its `to_dict()` form (read by
            `TransformerConfig.from_dict`, as a saved model's is).
        **kwargs: `keras.Model` keyword arguments: `name`, and `dtype`, the
            dtype policy of the model and every layer (e.g.
            "mixed_float16"; default: the global policy), kept by `save`.

    Example:
    ```python
    config = TransformerConfig.preset("tiny", vocab_size=1000)
    model = Transformer(config)
    logits = model({"source_ids": source_ids, "target_ids": target_ids})
    ```
    """

    def __init__(self, config: TransformerConfig | dict, **kwargs):
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        dtype = kwargs.pop("dtype", None)
        c = config

        # === Layers ===
        target_embedding = layers.ScaledEmbedding(
            c.vocab_size,
            c.d_model,
            dtype=dtype,
            name=(
                "shared_embedding"
                if c.share_embeddings == "all"
                else "target_embedding"
            ),
        )
        if c.share_embeddings == "all":
            source_embedding = target_embedding
        else:
            source_embedding = layers.ScaledEmbedding(
                c.input_vocab_size,
                c.d_model,
                dtype=dtype,
                name="source_embedding",
            )
        if c.share_embeddings == "none":
            output_projection = keras.layers.Dense(
                c.vocab_size, use_bias=False, dtype=dtype, name="logits"
            )
        else:
            output_projection = None
        source_position, target_position = (
            _positional_layer(c, dtype, name)
            for name in ("source_position", "target_position")
        )
        source_dropout, target_dropout = (
            layers.Dropout(c.dropout, dtype=dtype, name=name)
            for name in ("source_dropout", "target_dropout")
        )
        stack_arguments = dict(
            num_layers=c.num_layers,
            num_heads=c.num_heads,
            d_ff=c.d_ff,
            key_dim=c.head_key_dim,
            value_dim=c.head_value_dim,
            dropout=c.dropout,
            attention_dropout=c.attention_dropout,
            norm_position=c.norm_position,
            layer_norm_epsilon=c.layer_norm_epsilon,
            attention_bias=c.attention_bias,
            dtype=dtype,
        )
        encoder = layers.TransformerEncoder(**stack_arguments, name="encoder")
        decoder = layers.TransformerDecoder(**stack_arguments, name="decoder")
        source_padding_mask = layers.PaddingMask(
            dtype=dtype, name="source_padding_mask"
        )

        # === Functional model ===
        source_ids = keras.Input((None,), dtype="int32", name="source_ids")
        target_ids = keras.Input((None,), dtype="int32", name="target_ids")
        memory_mask = source_padding_mask(source_ids)  # [B, 1, S]
        x = _embed(
            source_ids, source_embedding, source_position, source_dropout
        )
        memory = encoder(x, padding_mask=memory_mask)  # [B, S, D]
        y = _embed(
            target_ids, target_embedding, target_position, target_dropout
        )
        y = decoder(y, memory=memory, memory_mask=memory_mask)  # [B, T, D]
        if output_projection is None:
            logits = target_embedding(y, reverse=True)
        else:
            logits = ops.cast(output_projection(y), "float32")
        super().__init__(
            inputs={"source_ids": source_ids, "target_ids": target_ids},
            outputs=logits,
            **kwargs,
        )
        if dtype is not None:
            # Keras's functional init drops `dtype`; the model's policy is
            # what `compile` reads to add loss scaling under mixed_float16.
            self.dtype_policy = dtype

        # === Config and layer handles for inference ===
        self.config = config
        self.source_embedding = source_embedding
        self.target_embedding = target_embedding
        self.output_projection = output_projection
        self.source_position = source_position
        self.target_position = target_position
        self.source_dropout = source_dropout
        self.target_dropout = target_dropout
        self.source_padding_mask = source_padding_mask
        self.encoder = encoder
        self.decoder = decoder
        # The training step's settings (see `train_step`).
        for name, default in _STEP_SETTINGS.items():
            setattr(self, name, default)

    def encode(
        self, source_ids, training=False, return_attention_weights=False
    ):
        """Runs the encoder.

        Args:
            source_ids: int32 [B, S], 0 = padding.
            training: enables dropout.
            return_attention_weights: also return the per-layer encoder
                self-attention weights [B, N, S, S].

        Returns:
            `(memory [B, S, D], memory_mask bool [B, 1, S])`, plus the
            weights list when asked.
        """
        memory_mask = self.source_padding_mask(source_ids)
        x = _embed(
            source_ids,
            self.source_embedding,
            self.source_position,
            self.source_dropout,
            training,
        )
        outputs = self.encoder(
            x,
            padding_mask=memory_mask,
            return_attention_weights=return_attention_weights,
            training=training,
        )
        if return_attention_weights:
            return outputs[0], memory_mask, outputs[1]
        return outputs, memory_mask

    def decode(
        self,
        target_ids,
        memory,
        memory_mask,
        training=False,
        return_attention_weights=False,
    ):
        """Runs the decoder on a whole (shifted) target sequence.

        Args:
            target_ids: int32 [B, T], BOS first.
            memory: [B, S, D] from `encode`.
            memory_mask: bool [B, 1, S] from `encode`.
            training: enables dropout.
            return_attention_weights: also return the per-layer list of
                {"self", "cross"} attention weights.

        Returns:
            float32 logits [B, T, V] (and the weights list when asked).
        """
        y = _embed(
            target_ids,
            self.target_embedding,
            self.target_position,
            self.target_dropout,
            training,
        )
        outputs = self.decoder(
            y,
            memory=memory,
            memory_mask=memory_mask,
            return_attention_weights=return_attention_weights,
            training=training,
        )
        if return_attention_weights:
            return self._logits(outputs[0]), outputs[1]
        return self._logits(outputs)

    def decoding_weights(self):
        """The weights of every decoding step, laid out as a step multiplies
        them best, once per decoding call (searches side by side can share
        them).

        Returns:
            A dict with `decoder_weights`, the per-layer weights of
            `TransformerDecoderLayer.decoding_weights`, and, with shared
            embeddings, `output_kernel`, the pre-softmax matrix laid out as
            [D, V] (see `ScaledEmbedding`).
        """
        weights = {"decoder_weights": self.decoder.decoding_weights()}
        if self.output_projection is None:
            weights["output_kernel"] = (
                self.target_embedding.transposed_embeddings(
                    self.decoder.compute_dtype
                )
            )
        return weights

    def initial_decoding_state(
        self, memory, max_length=None, decoding_weights=None, beam_size=None
    ):
        """Caches for `decode_step`.

        Args:
            memory: [B, S, D] encoder output.
            max_length: number of decoder steps fixed-size self-attention
                caches hold (an int or a scalar tensor): static shapes, as
                XLA needs. None gives growing caches (decode with
                `append_to_cache=True`), cheaper without XLA: a step copies
                the positions decoded so far rather than `max_length`.
            decoding_weights: `decoding_weights()`, computed here when None.
            beam_size: with `max_length`, the K of a beam search without
                XLA: caches of `max_length` positions for the B * K
                hypotheses, written in place and never reordered (a
                step neither copies nor gathers them;
                `reorder_decoding_state` moves only their ancestry). For
                one `tf.while_loop` that passes them from step to step.

        Returns:
            `(self_attention_cache, step_constants)`. The first, a per-layer
            list of dicts (with `beam_size`, a dict of those and their
            "ancestry"), fills step by step and follows the hypotheses in
            beam search through `reorder_decoding_state`. The second is
            what every step reads but is computed once: a dict with
            `cross_attention`, the per-layer encoder keys/values, and the
            entries of `decoding_weights()`. In `beam_search`, pass it
            (with the memory mask) as `static` with `tile_static=False`: it
            holds weights, and the cross-attention groups the K beams of a
            sentence itself.

        Raises:
            ValueError: if `beam_size` is given without `max_length`, or if
                `max_length` exceeds the learned position table (row E's
                `positional="learned"`): under XLA a step past it would
                read the table's last row instead of failing.
        """
        steps = tf.get_static_value(max_length)
        table = self.config.max_length
        if (
            self.config.positional == "learned"
            and steps is not None
            and steps > table
        ):
            raise ValueError(
                f"`max_length` {steps} exceeds the model's learned position "
                f"table of {table} positions: decode at most {table} steps. "
                f"Received: max_length={steps}"
            )
        batch_size = ops.shape(memory)[0]
        if beam_size is not None:
            batch_size *= beam_size
        self_cache = self.decoder.initial_cache(
            batch_size,
            max_length,
            self.decoder.compute_dtype,
            in_place=beam_size is not None,
        )
        if beam_size is not None:
            self_cache = {
                "caches": self_cache,
                "ancestry": ops.zeros((batch_size, max_length), dtype="int32"),
            }
        if decoding_weights is None:
            decoding_weights = self.decoding_weights()
        constants = {
            "cross_attention": self.decoder.project_memory(memory),
            **decoding_weights,
        }
        return self_cache, constants

    def decode_step(
        self,
        ids,
        step,
        self_attention_cache,
        step_constants,
        memory_mask,
        append_to_cache=False,
    ):
        """Decodes one position with the caches (incremental decoding).

        Args:
            ids: int32 [B], the tokens at position `step` (BOS at step 0).
            step: int32 scalar, 0-based position of `ids`.
            self_attention_cache: from `initial_decoding_state` or the last
                call.
            step_constants: from `initial_decoding_state`.
            memory_mask: bool [B, 1, S].
            append_to_cache: True for growing caches (`max_length=None` in
                `initial_decoding_state`; a `tf.while_loop` over the steps
                needs `layers.cache_shape_invariants`), False to write
                fixed-size caches at `step`. In-place caches ignore it.

        Returns:
            `(logits float32 [B, V], updated self_attention_cache)`: the
            logits equal those of a full forward pass at position `step`.
        """
        step = ops.cast(step, "int32")  # An int64 step indexes the same.
        y = self.target_embedding(ops.expand_dims(ids, 1))  # [B, 1, D]
        y = self.target_position(y, start_index=step)
        caches, rows = self_attention_cache, None
        if isinstance(self_attention_cache, dict):  # in place
            caches = self_attention_cache["caches"]
            ancestry, rows = in_place_cache_rows(
                self_attention_cache["ancestry"],
                step,
                self.decoder.sublayers[0].self_attention.num_heads,
            )
        y, new_cache = self.decoder(
            y,
            memory_mask=memory_mask,
            self_attention_cache=caches,
            cache_index=None if append_to_cache and rows is None else step,
            cache_rows=rows,
            cross_attention_cache=step_constants["cross_attention"],
            decoding_weights=step_constants["decoder_weights"],
        )
        if rows is not None:
            new_cache = {"caches": new_cache, "ancestry": ancestry}
        logits = self._logits(y, step_constants.get("output_kernel"))
        return logits[:, 0, :], new_cache

    @staticmethod
    def reorder_decoding_state(self_attention_cache, rows):
        """The self-attention state of the hypotheses that continue.

        Args:
            self_attention_cache: from `decode_step`.
            rows: int32 [B], the row (hypothesis) each new row continues.

        Returns:
            The state of the new rows: caches gathered, or of in-place
            caches (`beam_size`) only the ancestry, a few integers a row.
        """
        if isinstance(self_attention_cache, dict):
            return dict(
                self_attention_cache,
                ancestry=tf.gather(self_attention_cache["ancestry"], rows),
            )
        return tf.nest.map_structure(
            lambda x: tf.gather(x, rows), self_attention_cache
        )

    def _logits(self, hidden, output_kernel=None):
        if self.output_projection is None:
            return self.target_embedding(
                hidden, reverse=True, transposed_embeddings=output_kernel
            )
        return ops.cast(self.output_projection(hidden), "float32")

    def compile(self, *args, **kwargs):
        """`keras.Model.compile`, with the loss logged as `_StepMean` does."""
        super().compile(*args, **kwargs)
        # Untracked, as Keras sets its own: a tracked metric would also be
        # listed among the model's other metrics (a second "loss").
        object.__setattr__(self, "_loss_tracker", _StepMean(name="loss"))

    def compile_from_config(self, config):
        """Compiles a loaded model as `keras.Model.compile_from_config`
        does, which skips a model whose `compile` is overridden."""
        config = dict(config)
        # Files saved before the step's settings moved to `get_config`.
        settings = {
            name: config.pop(name) for name in _STEP_SETTINGS if name in config
        }
        self.compile(**keras.saving.deserialize_keras_object(config))
        for name, value in settings.items():
            setattr(self, name, value)
        if self.built:
            # Adam's moments now, so that the saved ones load into them.
            self.optimizer.build(self.trainable_variables)

    def train_step(self, data):
        """Keras's step; the accumulating step when
        `gradient_accumulation_steps` is above 1 (see
        `training/accumulation.py`); else the per-replica XLA step when
        `replica_jit_compile` is set (see `training/replica_xla.py`)."""
        if getattr(self, "gradient_accumulation_steps", 1) > 1:
            from keras_transformer.training import accumulation

            logs = accumulation.train_step(self, data)
        elif getattr(self, "replica_jit_compile", False):
            from keras_transformer.training import replica_xla

            logs = replica_xla.train_step(self, data)
        else:
            logs = super().train_step(data)
        if _is_multi_worker(self.distribute_strategy):
            # Keras averages the logs across workers with
            # `strategy.reduce("MEAN", value, axis=0)`, which fails on
            # scalars (tensorflow/tensorflow#72388): give them an axis. A
            # total's log is this worker's: times the workers, the mean is
            # the cluster's total (the progress bar showed half the tokens
            # under two workers; the epoch's logs read the whole variable).
            strategy = self.distribute_strategy
            workers = strategy.num_replicas_in_sync // len(
                strategy.extended.worker_devices
            )
            totals = _total_metric_names(self)
            logs = {
                name: ops.reshape(
                    value * workers if name in totals else value, (1,)
                )
                for name, value in logs.items()
            }
        return logs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Builds the compiled loss and metrics from the input signature.

        Under a `tf.distribute` strategy, Keras's TF trainer builds them from
        the first batch averaged over the replicas, which fails for token
        batches: each replica (and worker) has its own shape; and the
        grouped batches of gradient accumulation are not the model's
        inputs. The model's inputs are known, so a symbolic batch of that
        signature is used.
        """
        if (
            getattr(self, "_distribute_strategy", None) is None
            and getattr(self, "gradient_accumulation_steps", 1) == 1
        ):
            return super()._maybe_symbolic_build(iterator, data_batch)
        ids = keras.KerasTensor((None, None), "int32")
        batch = ({"source_ids": ids, "target_ids": ids}, ids)
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch=batch)

    def get_config(self):
        config = {
            "config": self.config.to_dict(),
            "name": self.name,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }
        # The step's settings that `compile_for_training` sets beside
        # `compile`, so that a model saved while accumulating gradients
        # takes the grouped batches again. Not in the compile config:
        # `keras.models.clone_model` passes that to a plain Functional's
        # `compile`, which refuses unknown arguments.
        for name, default in _STEP_SETTINGS.items():
            if getattr(self, name) != default:
                config[name] = getattr(self, name)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        settings = {
            name: config.pop(name) for name in _STEP_SETTINGS if name in config
        }
        model = cls(**config)
        for name, value in settings.items():
            setattr(model, name, value)
        return model


def _total_metric_names(model) -> set:
    """The names of `model`'s metrics that sum over the workers (their
    `sums_over_workers`, e.g. `TargetTokenCount`), compiled ones included."""
    names = set()
    for metric in model.metrics:
        # `CompileMetrics` holds the metrics given to `compile`.
        for inner in [metric, *getattr(metric, "metrics", ())]:
            if getattr(inner, "sums_over_workers", False):
                names.add(inner.name)
    return names


def _is_multi_worker(strategy) -> bool:
    extended = getattr(strategy, "extended", None)
    in_multi_worker = getattr(extended, "_in_multi_worker_mode", None)
    return bool(in_multi_worker and in_multi_worker())


def _embed(ids, embedding, position, dropout, training=None):
    """A side's decoder or encoder input: the token embeddings (times
    sqrt(d_model), section 3.4) plus the positions' (section 3.5), then
    dropout (section 5.4). `training` None: Keras's call context decides."""
    return dropout(position(embedding(ids)), training=training)


def _positional_layer(config, dtype, name):
    if config.positional == "learned":
        return layers.LearnedPositionalEmbedding(
            config.max_length, dtype=dtype, name=name
        )
    return layers.SinusoidalPositionalEncoding(dtype=dtype, name=name)


def build_transformer(config: TransformerConfig, **kwargs) -> Transformer:
    """Builds the functional Transformer model of `config`.

    Args:
        config: a `TransformerConfig`, e.g. `TransformerConfig.preset("base")`.
        **kwargs: `keras.Model` keyword arguments (`name`, `dtype`: see
            `Transformer`).

    Returns:
        A `Transformer` (a functional `keras.Model`) with inputs
        `source_ids` and `target_ids` (int32 [B, length], 0 = padding) and
        float32 logits [B, target length, vocab_size].
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(
            "`config` must be a TransformerConfig, e.g. "
            "TransformerConfig.preset('base'). "
            f"Received: config={config!r}"
        )
    return Transformer(config, **kwargs)
