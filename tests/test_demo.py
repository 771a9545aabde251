"""Tests of the demo command's flags and errors (not of a demo run)."""

import contextlib
import io
import json
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
                flags.IllegalFlagValueError,
                f"seed={seed}: .* not an integer in",
            ):
                parse(f"--seed={seed}")

    def test_user_errors_are_one_line_as_in_train(self):
        run_dir = os.path.join(fixtures.tempdir(self), "run")
        for args, message in (
            (
                ["--train_steps=5", "--steps_per_checkpoint=2"],
                "Received: train_steps=5, steps_per_checkpoint=2",
            ),
            (
                ["--batch_tokens=64"],
                "batch_tokens=64, max_length=128, replicas=1",
            ),
        ):
            with self.subTest(args=args):
                stderr = io.StringIO()
                with contextlib.redirect_stderr(stderr):
                    status = demo.main(
                        ["demo"], parse(f"--model_dir={run_dir}", *args)
                    )
                self.assertEqual(status, 1)
                self.assertRegex(
                    stderr.getvalue(), f"^demo: error: .*{message}\\n$"
                )
                self.assertFalse(os.path.exists(run_dir))

    def test_export_dir_is_checked_before_training_and_never_replaced(self):
        folder = fixtures.tempdir(self)
        run_dir = os.path.join(folder, "run")
        # A TF Serving base directory with a version of someone else's.
        served = os.path.join(folder, "models")
        os.makedirs(os.path.join(served, "transformer", "1"))
        a_file = fixtures.write(os.path.join(folder, "a_file"), "x")
        for export_dir, message in (
            (
                served,
                "models/transformer/1 exists and is not an export of this demo",
            ),
            (
                a_file,
                "a_file is a file, so the export directory cannot be created",
            ),
        ):
            with self.subTest(export_dir=export_dir):
                stderr = io.StringIO()
                with contextlib.redirect_stderr(stderr):
                    status = demo.main(
                        ["demo"],
                        parse(
                            f"--model_dir={run_dir}",
                            f"--export_dir={export_dir}",
                        ),
                    )
                self.assertEqual(status, 1)
                self.assertRegex(
                    stderr.getvalue(), f"^demo: error: .*{message}.*\\n$"
                )
                # Nothing trained, nothing deleted.
                self.assertFalse(os.path.exists(run_dir))
                self.assertTrue(
                    os.path.exists(os.path.join(served, "transformer", "1"))
                )

    def test_a_rerun_replaces_only_the_demos_own_export(self):
        folder = fixtures.tempdir(self)
        run_dir = os.path.join(folder, "run")
        own = os.path.join(folder, "models", "transformer", "1")
        os.makedirs(own)
        os.makedirs(run_dir)
        with self.assertRaises(FileExistsError):
            demo.check_export_path(own, run_dir)
        # The default export directory, and the one the last run's summary
        # names, are the demo's own.
        demo.check_export_path(
            os.path.join(run_dir, "export", "transformer", "1"), run_dir
        )
        fixtures.write(
            os.path.join(run_dir, demo.SUMMARY_FILE),
            json.dumps({"export": own}),
        )
        demo.check_export_path(own, run_dir)
