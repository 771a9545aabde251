"""Label-smoothed cross-entropy over real (non-padding) target tokens.

Shape legend: B batch, T target length, V vocabulary.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import tokens


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot + eps / V` (section 5.4).

    Padding labels (`pad_id`) contribute nothing, and the sum is divided by
    the number of real target tokens, so long and short batches weigh each
    token alike. Under `tf.distribute` with several replicas the divisor is
    the number of real tokens in the *global* batch (an all-reduce), so each
    replica returns `its sum / global tokens`; the replicas' gradients are
    summed, and the update is exactly that of the global batch on one
    device, however unevenly the tokens fall on the replicas. (Keras' own
    "mean" reductions would average per-replica means instead.)

    Args:
        label_smoothing: eps_ls (0.1 in the paper).
        pad_id: label id that is ignored.
        name: loss name.

    Call arguments:
        y_true: int labels [B, T].
        y_pred: float logits [B, T, V].

    Returns:
        The mean smoothed cross-entropy per real target token (a scalar).
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=tokens.PAD_ID,
        name="label_smoothed_cross_entropy",
        **kwargs,
    ):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing}"
            )
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        logits = ops.cast(y_pred, "float32")
        per_token = smoothed_token_losses(labels, logits, self.label_smoothing)
        weights = ops.cast(ops.not_equal(labels, self.pad_id), "float32")
        total = ops.sum(per_token * weights)
        num_tokens = ops.sum(weights)
        replica_context = tf.distribute.get_replica_context()
        if replica_context is not None and replica_context.num_replicas_in_sync > 1:
            num_tokens = replica_context.all_reduce("sum", num_tokens)
        return total / ops.maximum(num_tokens, 1.0)

    def get_config(self):
        return {
            "name": self.name,
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
        }


def smoothed_token_losses(labels, logits, label_smoothing):
    """Per-token smoothed cross-entropy [B, T] from logits [B, T, V].

    `-sum_v q_v log p_v = (1 - eps) * NLL + eps * (logsumexp(z) - mean(z))`:
    the uniform part needs no one-hot tensor of size V.
    """
    nll = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    if not label_smoothing:
        return nll
    uniform = ops.logsumexp(logits, axis=-1) - ops.mean(logits, axis=-1)
    return (1.0 - label_smoothing) * nll + label_smoothing * uniform
