"""XLA for the training step under a multi-replica `tf.distribute` strategy.

Keras compiles the whole step with XLA, including the optimizer's gradient
all-reduce, which XLA cannot hold across devices; so with `jit_compile="auto"`
it turns XLA off under a strategy, and `jit_compile=True` fails. Here each
replica runs its forward and backward pass as one XLA cluster, and the
all-reduce and the Adam update run outside it (`compile_for_training`
chooses this when the strategy has several replicas).

The accumulating step (`accumulation.py`) shares its pieces: one batch's
loss sum and gradients, with or without XLA, and their all-reduced update.
"""

import tensorflow as tf

from keras_transformer.layers.masks import keras_mask
from keras_transformer.training.losses import LabelSmoothedCrossEntropy


def _loss_sum_and_gradients(model, loss_fn, x, y, sample_weight=None):
    """One replica's summed token loss, token count (both weighted by
    `sample_weight` [B] or [B, T] when given, as `loss_fn` weights them),
    logits and gradients of the (loss-scaled) sum: the part of the step
    compiled by XLA."""
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        losses, weights = loss_fn.weighted_token_losses(
            y, logits, sample_weight, keras_mask(logits)
        )
        total = tf.reduce_sum(losses)
        num_tokens = tf.reduce_sum(weights)
        # float16 loss scaling scales the batch's mean, as in Keras's step:
        # the sum's float16 gradients would be num_tokens times larger, and
        # overflow (a skipped step) at scales the mean's do not.
        local_tokens = tf.maximum(num_tokens, 1.0)
        scaled = model.optimizer.scale_loss(total / local_tokens)
    gradients = tape.gradient(scaled, model.trainable_weights)
    # In float32 now: the gradients of the (loss-scaled) sum.
    gradients = [None if g is None else g * local_tokens for g in gradients]
    return total, num_tokens, logits, gradients


def train_step(model, data):
    """`Model.train_step` with a per-replica XLA forward/backward pass.

    The loss is normalised by the real target tokens of the global batch,
    as `LabelSmoothedCrossEntropy` does, so the update equals the
    single-device step on the same global batch.

    Args:
        model: a compiled `Transformer` whose loss is a
            `LabelSmoothedCrossEntropy`.
        data: `(features, labels)` or `(features, labels, sample_weight)`
            of one replica (weights as `LabelSmoothedCrossEntropy` takes).

    Returns:
        The metrics dict, as `Model.train_step` returns it.
    """
    x, y = data[0], data[1]
    sample_weight = data[2] if len(data) > 2 else None
    total, num_tokens, logits, gradients = loss_sum_and_gradients(model)(
        x, y, sample_weight
    )
    model.compute_metrics(x, y, logits, sample_weight=sample_weight)
    return apply_gradient_sums(model, total, num_tokens, gradients)


def loss_sum_and_gradients(model):
    """The function `(x, y, sample_weight) -> (loss sum, token count,
    logits, gradients of the loss sum)` of one replica's batch: compiled
    by XLA when `model.replica_jit_compile` is set, else traced into the
    caller's graph. Sums and counts are weighted by `sample_weight`, as
    `LabelSmoothedCrossEntropy` weights them.

    Raises:
        TypeError: if the model's loss is not a `LabelSmoothedCrossEntropy`.
    """
    loss_fn = model.loss
    if not isinstance(loss_fn, LabelSmoothedCrossEntropy):
        raise TypeError(
            "The per-replica and accumulating training steps need the model "
            "compiled with LabelSmoothedCrossEntropy. "
            f"Received: loss={type(loss_fn).__name__}"
        )

    def compute(x, y, w):
        return _loss_sum_and_gradients(model, loss_fn, x, y, w)

    if not getattr(model, "replica_jit_compile", False):
        return compute
    compiled = getattr(model, "_replica_xla_function", None)
    if compiled is None:
        compiled = tf.function(compute, jit_compile=True, reduce_retracing=True)
        model._replica_xla_function = compiled
    return compiled


def apply_gradient_sums(model, total, num_tokens, gradients):
    """Applies one replica's gradients of its summed token loss, divided
    by the real target tokens of the global batch, and logs the loss.

    Args:
        model: the compiled `Transformer`.
        total: this replica's summed token loss (a scalar).
        num_tokens: this replica's real target tokens (a scalar).
        gradients: gradients of the (loss-scaled) `total`, one per
            trainable weight.

    Returns:
        The metrics dict, as `Model.train_step` returns it (the other
        metrics must already be updated).
    """
    context = tf.distribute.get_replica_context()
    num_replicas = context.num_replicas_in_sync
    if num_replicas > 1:
        num_tokens = context.all_reduce("sum", num_tokens)
    num_tokens = tf.maximum(num_tokens, 1.0)
    # Optimizer.apply sums the replicas' gradients (and undoes loss scaling).
    gradients = [gradient / num_tokens for gradient in gradients]
    model.optimizer.apply(gradients, model.trainable_weights)
    # The tracker (`model._StepMean`) averages the replicas' values: R times
    # each one's share of the step's loss adds up to it.
    model._loss_tracker.update_state(total / num_tokens * num_replicas)
    return model.get_metrics_result()
