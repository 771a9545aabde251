import json

import keras
import numpy as np

from keras_transformer.training import TransformerSchedule
from tests.test_case import TestCase


def paper_rate(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class TransformerScheduleTest(TestCase):
    def test_values_equal_equation_3(self):
        # Called with the updates done, for the paper's step_num (from 1)
        # of the update being made.
        schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
        for step_num in (1, 2, 10, 3999, 4000, 4001, 100000):
            self.assertAllClose(
                float(schedule(step_num - 1)),
                paper_rate(step_num, 512, 4000),
                rtol=1e-5,
            )

    def test_peaks_at_warmup(self):
        schedule = TransformerSchedule(d_model=512, warmup_steps=100)
        updates_done = np.arange(0, 1000)
        values = np.array([float(schedule(s)) for s in updates_done])
        self.assertEqual(updates_done[values.argmax()] + 1, 100)

    def test_each_update_gets_the_rate_of_its_step(self):
        # The first update has the rate of step 1 (finite, not 0), the second
        # that of step 2: each update its own (it lagged one step behind).
        schedule = TransformerSchedule(d_model=64, warmup_steps=10)
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(schedule)
        kernel = model.trainable_variables[0]
        for step_num in (1, 2, 3):
            before = kernel.numpy().copy()
            # d(loss)/d(kernel) = 1 for loss = kernel * 1 (input 1, bias 0).
            optimizer.apply(
                [np.ones_like(before), np.zeros((1,), "float32")],
                model.trainable_variables,
            )
            self.assertAllClose(
                before - kernel.numpy(),
                [[paper_rate(step_num, 64, 10)]],
                rtol=1e-5,
            )

    def test_scale(self):
        base = TransformerSchedule(64, 10)
        scaled = TransformerSchedule(64, 10, scale=2.0)
        self.assertAllClose(float(scaled(50)), 2 * float(base(50)))

    def test_serialization_round_trip(self):
        schedule = TransformerSchedule(256, 1000, scale=0.5)
        serialized = keras.optimizers.schedules.serialize(schedule)
        json.dumps(serialized)
        revived = keras.optimizers.schedules.deserialize(serialized)
        self.assertEqual(revived.get_config(), schedule.get_config())
        self.assertAllClose(float(revived(77)), float(schedule(77)))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "warmup_steps=0"):
            TransformerSchedule(512, 0)
        with self.assertRaisesRegex(ValueError, "scale=0"):
            TransformerSchedule(512, 10, scale=0)
        # A NaN or infinite factor would make every update NaN, silently;
        # other types fail as clearly (not with a TypeError from `<=`).
        for scale in (float("nan"), float("inf"), "2", None, True):
            with (
                self.subTest(scale=scale),
                self.assertRaisesRegex(
                    ValueError,
                    f"positive finite number. Received: scale={scale!r}",
                ),
            ):
                TransformerSchedule(512, 10, scale=scale)

    def test_a_d_model_that_is_not_a_positive_integer_is_refused(self):
        # The width would otherwise be truncated (512.5), read as 1 (True),
        # or fail only at the first step (0, a negative width's complex
        # rate).
        for d_model in (0, -512, 512.5, "512", True):
            with (
                self.subTest(d_model=d_model),
                self.assertRaisesRegex(
                    ValueError,
                    "`d_model` must be a positive integer. "
                    f"Received: d_model={d_model!r}",
                ),
            ):
                TransformerSchedule(d_model, 10)

    def test_numpy_numbers_make_a_json_config(self):
        schedule = TransformerSchedule(
            np.int64(64), np.int32(10), np.float32(0.5)
        )
        self.assertEqual(
            json.loads(json.dumps(schedule.get_config())),
            {"d_model": 64, "warmup_steps": 10, "scale": 0.5},
        )
        self.assertAllClose(
            float(schedule(19)), 0.5 * paper_rate(20, 64, 10), rtol=1e-6
        )
