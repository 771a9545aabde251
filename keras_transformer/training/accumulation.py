"""Gradient accumulation: one optimizer step over several token batches.

The paper's steps take batches of ~25,000 source and ~25,000 target tokens
(32,768 with padding, as `--batch_tokens` counts) on 8 GPUs (section 5.1).
With fewer devices, or less memory, a step can take
`gradient_accumulation_steps` (N) batches one after another, as
OpenNMT-tf's `accum_steps` and fairseq's `--update-freq` do. The N batches
of a step arrive as one dataset element (`batching.group_batches`:
RaggedTensors [N, (B), (T)]), so a `fit` step is still one optimizer step:
the step counter, the schedule, Adam's bias correction, checkpoints and
resumption all count updates, as without accumulation. (Keras's own
`gradient_accumulation_steps` optimizer argument advances `iterations` on
every batch, so the paper's warmup would end N times too early; and it
averages the batches' means instead of weighting tokens.)

The update is exactly that of one step over the N batches together: the
gradients of each batch's summed token loss are added up, and the sum is
divided by the real target tokens of all N batches on all replicas, as
`LabelSmoothedCrossEntropy` divides one batch's. Gradients are summed on
each replica and all-reduced once, at the update.
"""

import tensorflow as tf

from keras_transformer.training import replica_xla


def train_step(model, data):
    """`Model.train_step` over the N batches of one step.

    Each batch's forward and backward pass is an XLA cluster when
    `model.replica_jit_compile` is set (see `replica_xla.py`).

    Args:
        model: a compiled `Transformer` (loss `LabelSmoothedCrossEntropy`)
            whose `gradient_accumulation_steps` is N.
        data: `(features, labels)` or `(features, labels, sample_weight)`
            of one replica, each tensor with the step's batches stacked on
            a first axis (RaggedTensors of `batching.group_batches`, or
            dense tensors): N of them, or fewer at the end of a finite
            dataset.

    Returns:
        The metrics dict, as `Model.train_step` returns it.

    Raises:
        ValueError: if the labels are not a stack of at most N batches.
    """
    x, y = data[0], data[1]
    sample_weight = data[2] if len(data) > 2 else None
    steps = model.gradient_accumulation_steps
    if y.shape.rank != 3 or (y.shape[0] or 0) > steps:
        raise ValueError(
            f"With gradient_accumulation_steps={steps}, each dataset element "
            f"must hold the batches of a step ({steps}, or fewer at the end "
            "of the data) stacked on a first axis: group them with "
            "`batching.group_batches`. Received: labels of shape "
            f"{y.shape}"
        )
    compute = replica_xla.loss_sum_and_gradients(model)
    variables = model.trainable_weights

    def accumulate(i, total, num_tokens, sums):
        xi, yi = tf.nest.map_structure(lambda tensor: _dense(tensor[i]), (x, y))
        wi = None if sample_weight is None else _dense(sample_weight[i])
        batch_total, batch_tokens, logits, gradients = compute(xi, yi, wi)
        model.compute_metrics(xi, yi, logits, sample_weight=wi)
        sums = [s + tf.cast(g, s.dtype) for s, g in zip(sums, gradients)]
        return i + 1, total + batch_total, num_tokens + batch_tokens, sums

    # N, or fewer in the last group of a finite dataset.
    num_batches = (
        y.nrows() if isinstance(y, tf.RaggedTensor) else tf.shape(y)[0]
    )
    zero = tf.constant(0.0)
    _, total, num_tokens, sums = tf.while_loop(
        lambda i, *_: i < tf.cast(num_batches, tf.int32),
        accumulate,
        (tf.constant(0), zero, zero, [tf.zeros_like(v) for v in variables]),
        # One batch at a time, so that a step holds one batch's
        # activations: the passes do not depend on each other, and with the
        # default (10) the next batch's forward pass ran beside the last
        # one's backward pass (base, N = 4, no XLA: peak RSS 3.0-3.2 ->
        # 2.5 GiB, ~7 % slower; benchmarks/PERFORMANCE.md).
        parallel_iterations=1,
    )
    return replica_xla.apply_gradient_sums(model, total, num_tokens, sums)


def _dense(tensor):
    # One batch of a group: padded to its own longest row, not the group's.
    return tensor.to_tensor() if isinstance(tensor, tf.RaggedTensor) else tensor
