"""The learning-rate schedule of section 5.3."""

import keras
from keras import ops

from keras_transformer.checks import check_positive_int, check_positive_number


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)` (Eq. 3).

    The rate grows linearly for `warmup_steps` steps, peaks at step
    `warmup_steps`, then decays with the inverse square root of the step.
    Keras calls a schedule with the optimizer's `iterations`, the updates
    done so far (0 at the first update), while the paper's `step_num`
    counts from 1: so `schedule(iterations)` is the paper's rate at
    `step_num = iterations + 1`, the update being made. The first update
    gets the rate of step 1 (not 0, which would waste it), and update
    `warmup_steps` the peak.

    Args:
        d_model: the model width (512 for base).
        warmup_steps: 4000 in the paper.
        scale: a constant factor on the whole schedule (1.0 in the paper).

    Example:
    ```python
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    optimizer = keras.optimizers.Adam(schedule, 0.9, 0.98, 1e-9)
    ```
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        super().__init__()
        # Stored as Python numbers, so that `get_config` stays JSON-
        # serializable; bools fail, and so does a NaN or infinite `scale`,
        # which would make every update NaN, silently.
        self.d_model = check_positive_int("d_model", d_model)
        self.warmup_steps = check_positive_int("warmup_steps", warmup_steps)
        self.scale = check_positive_number("scale", scale)

    def __call__(self, step):
        """The rate of the update made after `step` updates (the paper's
        `step_num = step + 1`)."""
        step = ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        return (
            self.scale
            * float(self.d_model) ** -0.5
            * ops.minimum(ops.rsqrt(step), step * warmup**-1.5)
        )

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }
