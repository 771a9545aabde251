"""The paper's Adam (section 5.3), with each variable's update as one kernel.

Keras 3's `Adam.update_step` is a dozen element-wise ops per variable (two
`assign_add`s, a square, a square root, a division...). Without XLA each op
is a separate pass over the variable's memory and a separate kernel launch:
measured on 2 CPU cores, that is 3300 ops and ~30 ms of a 360 ms training
step at the small config, and 6600 ops and ~260 ms of a 2.6 s step at base.
TensorFlow's `ResourceApplyAdam` does the same update in one multi-threaded
pass per variable, with the same formula (the "epsilon hat" form Keras also
uses), so the trained weights agree to float rounding. The wall time gains
less than the op time, as the unfused ops overlapped the backward pass: A/B
in one process, small 392 -> 379 ms, base 2494 -> 2444 ms; base peak RSS
3571 -> 3486 MiB. Under XLA, which fuses either form, nothing changes.
"""

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.training.schedule import TransformerSchedule


@keras.saving.register_keras_serializable(package="keras_transformer")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose dense update is TensorFlow's fused kernel.

    Same arguments, variables (`m`, `v` per weight), config and checkpoints
    as `keras.optimizers.Adam`, so either one can resume the other's run.
    The update of each dense weight is one `ResourceApplyAdam` op (XLA has
    a kernel for it too); `amsgrad=True` and sparse (`IndexedSlices`)
    gradients run Keras's own update. It works under `tf.distribute`
    strategies that mirror variables (Mirrored, MultiWorkerMirrored), as
    TF's own optimizers did.

    Args:
        As `keras.optimizers.Adam`.
    """

    def build(self, var_list):
        # The paper's epsilon, 1e-9, is 0 in float16: every weight whose
        # gradient is 0 would then be updated by 0 / 0 (NaN), silently.
        for variable in var_list:
            dtype = tf.as_dtype(variable.dtype)
            rounded = np.asarray(self.epsilon, dtype.as_numpy_dtype)
            if dtype.is_floating and self.epsilon > 0 and rounded == 0:
                name = getattr(variable, "path", variable.name)
                raise ValueError(
                    f"Adam's `epsilon` {self.epsilon} is 0 in {dtype.name}, "
                    f"the dtype of the weight `{name}`: its "
                    "updates would divide 0 by 0 (NaN). Keep the weights "
                    "in float32 (a 'mixed_float16' or 'mixed_bfloat16' "
                    f"policy), or pass an `epsilon` that {dtype.name} "
                    "holds (at least 1e-7 in float16)."
                )
        super().build(var_list)

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad or isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        m = self._momentums[index].value
        v = self._velocities[index].value
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )


def transformer_optimizer(
    d_model,
    warmup_steps=4000,
    scale=1.0,
    beta_1=0.9,
    beta_2=0.98,
    epsilon=1e-9,
    **kwargs,
):
    """Adam with the paper's settings (section 5.3) on `TransformerSchedule`.

    Args:
        d_model: model width.
        warmup_steps: schedule warmup.
        scale: schedule factor.
        beta_1, beta_2, epsilon: Adam settings (paper: 0.9, 0.98, 1e-9).
        **kwargs: further `keras.optimizers.Adam` arguments (e.g.
            `clipnorm`).

    Returns:
        A `FusedAdam`.
    """
    return FusedAdam(
        learning_rate=TransformerSchedule(d_model, warmup_steps, scale),
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        **kwargs,
    )


@keras.saving.register_keras_serializable(package="keras_transformer")
class StepCountingLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` whose `iterations` counts every
    step, including the ones it skips for non-finite gradients.

    Keras 3's optimizer advances `iterations` (the inner optimizer's) only on
    the steps it applies, while `fit` runs a fixed number of steps: a run
    whose loss scale overflowed then names its checkpoints, resumes and
    schedules BLEU by a counter that lags the steps run (and a rerun
    overshoots). Keras 2's optimizer counted skipped steps too; so does this
    one, so the learning rate also follows the steps run, as with
    `float32`. The variables and config are those of
    `keras.optimizers.LossScaleOptimizer`.

    Args:
        As `keras.optimizers.LossScaleOptimizer`.
    """

    def apply(self, grads, trainable_variables=None):
        # Read before the update (resource ops run in program order), and
        # set unconditionally afterwards: every replica runs the same ops,
        # whether or not the step was skipped.
        step = tf.identity(self.iterations)
        super().apply(grads, trainable_variables)
        self.iterations.assign(step + 1)
