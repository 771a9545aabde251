"""Label-smoothed cross-entropy over real (non-padding) target tokens.

Shape legend: B batch, T target length, V vocabulary.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import tokens
from keras_transformer.checks import check_pad_id, is_real
from keras_transformer.layers.masks import keras_mask


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot + eps / V` (section 5.4).

    The eps mass goes to all V ids, padding, BOS and the label's own
    included, as Keras's `label_smoothing` does; tensor2tensor spread it
    over the V - 1 others, which changes the loss and its gradient by
    terms of order eps / V.

    Padding labels (`pad_id`) contribute nothing, and the sum is divided by
    the number of real target tokens, so long and short batches weigh each
    token alike. Under `tf.distribute` with several replicas the divisor is
    the number of real tokens in the *global* batch (an all-reduce), so each
    replica returns `its sum / global tokens`; the replicas' gradients are
    summed, and the update is exactly that of the global batch on one
    device, however unevenly the tokens fall on the replicas. (Keras' own
    "mean" reductions would average per-replica means instead.) The loss
    that Keras's `fit` then logs for a model of your own is the replicas'
    values weighted by their sentence counts, not the global mean, when a
    batch splits unevenly; `model.Transformer` logs the global mean.

    Args:
        label_smoothing: eps_ls (0.1 in the paper).
        pad_id: label id that is ignored.
        reduction: "mean_with_sample_weight" (the default): the weighted
            mean over real tokens described above, or "none" (or None):
            the weighted per-token losses [B, T], 0 at padding.
        name: loss name.

    Call arguments:
        y_true: int labels [B, T] (or [B, T, 1]).
        y_pred: float logits [B, T, V].
        sample_weight: optional weights [B] (per sentence) or [B, T] (per
            token), e.g. of `model.fit(..., sample_weight=...)`: they weight
            each token in the sum and in the token count, so ones change
            nothing and zeros remove tokens. A Keras mask on `y_pred` (e.g.
            of `ScaledEmbedding(mask_zero=True)` through the decoder)
            removes the tokens it masks, as in Keras's losses.

    Returns:
        The mean smoothed cross-entropy per real target token (a scalar),
        weighted by `sample_weight` when given; with `reduction="none"`
        each token's loss times its weight, [B, T].

    Raises:
        ValueError: for any other `reduction` (e.g. "sum" or Keras's default
            "sum_over_batch_size", which would count padding).
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=tokens.PAD_ID,
        reduction="mean_with_sample_weight",
        name="label_smoothed_cross_entropy",
        **kwargs,
    ):
        if reduction not in _REDUCTIONS:
            raise ValueError(
                '`reduction` must be "mean_with_sample_weight" (the default: '
                'the mean over real tokens) or "none" (the per-token losses '
                "[B, T], to reduce as you like). "
                f"Received: reduction={reduction!r}"
            )
        super().__init__(name=name, reduction=reduction, **kwargs)
        if not is_real(label_smoothing) or not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be a number in [0, 1) (paper: 0.1). "
                f"Received: label_smoothing={label_smoothing!r}"
            )
        self.label_smoothing = float(label_smoothing)
        self.pad_id = check_pad_id(pad_id)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras's `Loss.__call__` would multiply the token mean that `call`
        # returns by each weight, or by each unmasked position of a Keras
        # mask on the logits, and sum the products (B or B * T times the
        # loss for weights of one). Here weights and mask weight tokens.
        with keras.name_scope(self.name):
            return self.call(y_true, y_pred, sample_weight, keras_mask(y_pred))

    def call(self, y_true, y_pred, sample_weight=None, mask=None):
        losses, weights = self.weighted_token_losses(
            y_true, y_pred, sample_weight, mask
        )
        if self.reduction in ("none", None):
            return losses
        total = ops.sum(losses)
        num_tokens = ops.sum(weights)
        replica_context = tf.distribute.get_replica_context()
        if (
            replica_context is not None
            and replica_context.num_replicas_in_sync > 1
        ):
            num_tokens = replica_context.all_reduce("sum", num_tokens)
        return total / ops.maximum(num_tokens, 1.0)

    def weighted_token_losses(
        self, y_true, y_pred, sample_weight=None, mask=None
    ):
        """The weighted per-token losses and the token weights, both [B, T].

        The loss's one definition of which tokens count and how much: the
        reduced loss is `sum(losses) / sum(weights)` over the global batch,
        and the per-replica and accumulating training steps
        (`replica_xla.py`) sum the same two tensors.

        Args:
            y_true: labels [B, T] or [B, T, 1].
            y_pred: logits [B, T, V].
            sample_weight: optional weights [B] or [B, T].
            mask: optional Keras mask [B, T] of `y_pred`.

        Returns:
            `(losses, weights)`: float32 [B, T] each; `losses` is the
            smoothed cross-entropy times `weights`, and `weights` is 0 at
            `pad_id` and masked positions, else the sample weight (or 1).
        """
        labels = token_labels(y_true, y_pred)
        logits = ops.cast(y_pred, "float32")
        per_token = smoothed_token_losses(labels, logits, self.label_smoothing)
        weights = token_weights(labels, self.pad_id, sample_weight, mask)
        return per_token * weights, weights

    def get_config(self):
        return {
            "name": self.name,
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
            "reduction": self.reduction,
        }


_REDUCTIONS = ("mean_with_sample_weight", "none", None)


def token_labels(y_true, y_pred):
    """int32 labels [B, T] from `y_true` [B, T], or [B, T, 1] as Keras's
    sparse cross-entropy also takes, for logits `y_pred` [B, T, V].

    Raises:
        ValueError: if the labels are not ids of the logits' positions (a
            one-hot [B, T, V], or another length T), as far as the shapes
            are known.
    """
    labels = ops.cast(y_true, "int32")
    if len(labels.shape) == len(y_pred.shape) and labels.shape[-1] == 1:
        labels = ops.squeeze(labels, axis=-1)
    length, expected = tuple(labels.shape[1:2]), tuple(y_pred.shape[1:2])
    if len(labels.shape) != len(y_pred.shape) - 1 or (
        None not in length + expected and length != expected
    ):
        # Else a GatherV2 rank error or a shape mismatch from deep inside.
        raise ValueError(
            "The labels must be the target token ids [B, T] (or [B, T, 1]) "
            "of the logits [B, T, V]: sparse, not one-hot (take their argmax), "
            "and as long as the logits. Received: "
            f"y_true.shape={tuple(y_true.shape)}, "
            f"y_pred.shape={tuple(y_pred.shape)}"
        )
    return labels


def token_weights(labels, pad_id, sample_weight=None, mask=None):
    """float32 weights [B, T] of the tokens of `labels` [B, T]: 0 at
    `pad_id` and where the Keras `mask` [B, T] is False, else 1 times
    `sample_weight` [B] or [B, T] when given.

    Raises:
        ValueError: if `sample_weight` is neither [B] nor [B, T].
    """
    weights = ops.cast(ops.not_equal(labels, pad_id), "float32")
    if mask is not None:
        weights *= ops.cast(mask, "float32")
    if sample_weight is None:
        return weights
    sample_weight = ops.cast(sample_weight, "float32")
    if sample_weight.shape.rank not in (None, 1, 2):  # None: unknown in a trace
        raise ValueError(
            "`sample_weight` must have shape [B] (per sentence) or [B, T] "
            f"(per token). Received: sample_weight.shape={sample_weight.shape}"
        )
    # [B] -> [B, 1] (per sentence), [B, T] unchanged; also when a traced
    # function leaves the rank unknown.
    return weights * ops.reshape(sample_weight, (ops.shape(weights)[0], -1))


def smoothed_token_losses(labels, logits, label_smoothing):
    """Per-token smoothed cross-entropy [B, T] from logits [B, T, V].

    `-sum_v q_v log p_v = logsumexp(z) - (1 - eps) * z_y - eps * mean(z)`
    for `q = (1 - eps) * one_hot(y) + eps / V`. Computed as one op with its
    own gradient, `softmax(z) - q`: no one-hot and no log-softmax tensor of
    size V, and the backward pass holds a single [B, T, V] tensor (the
    logits of a base batch are 0.26 GB, so each copy counts).
    """
    labels = tf.cast(labels, tf.int32)
    logits = tf.cast(logits, tf.float32)
    return _smoothed_cross_entropy(logits, labels, float(label_smoothing))


def _smoothed_cross_entropy(logits, labels, label_smoothing):
    @tf.custom_gradient
    def loss(logits):
        vocab_size = tf.cast(tf.shape(logits)[-1], tf.float32)
        log_norm = tf.reduce_logsumexp(logits, axis=-1)  # [B, T]
        label_logits = tf.gather(logits, labels, batch_dims=labels.shape.rank)
        values = log_norm - (1.0 - label_smoothing) * label_logits
        if label_smoothing:
            values -= label_smoothing * tf.reduce_mean(logits, axis=-1)

        def gradient(upstream):  # upstream [B, T]
            # softmax(z) - eps / V - (1 - eps) * one_hot(y), times upstream.
            grad = tf.exp(logits - log_norm[..., None])
            if label_smoothing:
                grad -= label_smoothing / vocab_size
            grad *= upstream[..., None]
            # Subtract (1 - eps) * upstream at each label: a scatter into
            # the flattened rows instead of a one-hot of size V.
            flat = tf.reshape(grad, [-1, tf.shape(grad)[-1]])  # [B*T, V]
            rows = tf.range(tf.shape(flat)[0])
            indices = tf.stack([rows, tf.reshape(labels, [-1])], axis=1)
            flat = tf.tensor_scatter_nd_sub(
                flat,
                indices,
                (1.0 - label_smoothing) * tf.reshape(upstream, [-1]),
            )
            return tf.reshape(flat, tf.shape(logits))

        return values, gradient

    return loss(logits)
