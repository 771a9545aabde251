"""Tests of the demo command's flags and errors (not of a demo run)."""

import contextlib
import io
import os

from absl import flags

from keras_transformer import demo
from keras_transformer.training import run_checks
from tests.data import fixtures
from tests.test_case import TestCase


def parse(*args):
    flag_values = flags.FlagValues()
    demo.define_flags(flag_values)
    flag_values(["demo", *args])
    return flag_values


class DemoFlagsTest(TestCase):
    def test_seed_bounds_are_trains(self):
        self.assertEqual(parse(f"--seed={run_checks.MAX_SEED}").seed, 2**32 - 1)
        for seed in ("-1", "4294967296"):
            with self.assertRaisesRegex(
                flags.IllegalFlagValueError, f"seed={seed}: .* not an integer in"
            ):
                parse(f"--seed={seed}")

    def test_user_errors_are_one_line_as_in_train(self):
        run_dir = os.path.join(fixtures.tempdir(self), "run")
        for args, message in (
            (
                ["--train_steps=5", "--steps_per_checkpoint=2"],
                "Received: train_steps=5, steps_per_checkpoint=2",
            ),
            (["--batch_tokens=64"], "batch_tokens=64, max_length=128, replicas=1"),
        ):
            with self.subTest(args=args):
                stderr = io.StringIO()
                with contextlib.redirect_stderr(stderr):
                    status = demo.main(["demo"], parse(f"--model_dir={run_dir}", *args))
                self.assertEqual(status, 1)
                self.assertRegex(stderr.getvalue(), f"^demo: error: .*{message}\\n$")
                self.assertFalse(os.path.exists(run_dir))
