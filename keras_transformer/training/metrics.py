"""Masked token accuracy and perplexity, for `model.compile(metrics=...)`.

Shape legend: B batch, T target length, V vocabulary.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import tokens
from keras_transformer.checks import check_pad_id
from keras_transformer.layers.masks import keras_mask
from keras_transformer.training.losses import token_labels, token_weights


class _MaskedTokenMean(keras.metrics.Metric):
    """Running mean of a per-token value over real (non-padding) labels.

    `update_state(y_true, y_pred, sample_weight)` takes optional weights [B]
    (per sentence) or [B, T] (per token); zeros remove tokens from the mean.
    (`model.fit` passes its `sample_weight` to `weighted_metrics` only.)
    A Keras mask on the logits removes its False positions too, as in
    Keras's own metrics and `LabelSmoothedCrossEntropy`.
    """

    def __init__(self, pad_id=tokens.PAD_ID, name=None, dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.pad_id = check_pad_id(pad_id)
        self.total = self.add_variable((), initializer="zeros", name="total")
        self.count = self.add_variable((), initializer="zeros", name="count")

    def token_values(self, labels, logits):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = token_labels(y_true, y_pred)
        weights = token_weights(
            labels, self.pad_id, sample_weight, keras_mask(y_pred)
        )
        values = self.token_values(labels, ops.cast(y_pred, "float32"))
        self.total.assign_add(ops.sum(values * weights))
        self.count.assign_add(ops.sum(weights))

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        return {"name": self.name, "pad_id": self.pad_id, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedTokenAccuracy(_MaskedTokenMean):
    """Fraction of real target tokens whose argmax prediction is right.

    Args:
        pad_id: label id that is ignored.
        name: metric name.
    """

    def __init__(self, pad_id=tokens.PAD_ID, name="token_accuracy", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def token_values(self, labels, logits):
        # `tf.argmax`, not `ops.argmax`: Keras's maps -0.0 to -tiny first
        # (for flush-to-zero backends), five more passes over the [B, T, V]
        # logits that cost ~100 ms of a 2.6 s base training step on 2 cores
        # and ~385 MiB of its peak RSS.
        predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return ops.cast(ops.equal(predictions, labels), "float32")

    def result(self):
        return self.total / ops.maximum(self.count, 1.0)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(_MaskedTokenMean):
    """exp(mean negative log-likelihood) over real target tokens (no
    smoothing), the figure Table 3 reports per wordpiece.

    Args:
        pad_id: label id that is ignored.
        name: metric name.
    """

    def __init__(self, pad_id=tokens.PAD_ID, name="perplexity", **kwargs):
        super().__init__(pad_id=pad_id, name=name, **kwargs)

    def token_values(self, labels, logits):
        return ops.sparse_categorical_crossentropy(
            labels, logits, from_logits=True
        )

    def result(self):
        return ops.exp(self.total / ops.maximum(self.count, 1.0))


@keras.saving.register_keras_serializable(package="keras_transformer")
class TargetTokenCount(keras.metrics.Metric):
    """Number of real (non-padding) target tokens seen since the last reset.

    Summed over replicas under `tf.distribute`, so it counts the global
    batches; `callbacks.ThroughputLogger` turns it into tokens per second.

    Args:
        pad_id: label id that is not counted.
        name: metric name.
    """

    # A total, not a mean: under a multi-worker strategy, the train step
    # scales its per-batch log by the workers, as Keras averages those logs
    # across workers (`Transformer.train_step`).
    sums_over_workers = True

    def __init__(self, pad_id=tokens.PAD_ID, name="target_tokens", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = check_pad_id(pad_id)
        self.count = self.add_variable((), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        del y_pred, sample_weight  # Counts labels only.
        real = ops.not_equal(ops.cast(y_true, "int32"), self.pad_id)
        self.count.assign_add(ops.sum(ops.cast(real, "float32")))

    def result(self):
        return self.count

    def reset_state(self):
        self.count.assign(0.0)

    def get_config(self):
        return {"name": self.name, "pad_id": self.pad_id, "dtype": self.dtype}
