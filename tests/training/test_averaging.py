"""Tests of checkpoint averaging and its command."""

import contextlib
import io
import os
import re
import subprocess
import sys
from unittest import mock

import keras
import pytest
import tensorflow as tf
from absl import flags

from keras_transformer import average_checkpoints, build_transformer
from keras_transformer.training import averaging
from keras_transformer.training.callbacks import checkpoint_path
from tests.data import fixtures
from tests.test_case import TestCase
from tests.training.test_trainer import tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def write_checkpoints(folder, steps):
    """A run directory with one random checkpoint per step; the models."""
    checkpoint_dir = os.path.join(folder, "checkpoints")
    os.makedirs(checkpoint_dir)
    models = []
    for step in steps:
        keras.utils.set_random_seed(step)
        models.append(build_transformer(tiny_config()))
        models[-1].save(checkpoint_path(checkpoint_dir, step))
    return models


def run_command(*args):
    """`python -m keras_transformer.average_checkpoints` on the flags."""
    return subprocess.run(
        [sys.executable, "-m", "keras_transformer.average_checkpoints", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


class AveragingTest(TestCase):
    def test_last_checkpoints_are_the_newest_by_step(self):
        folder = fixtures.tempdir(self)
        write_checkpoints(folder, [2, 10, 4])
        self.assertEqual(
            [
                os.path.basename(p)
                for p in averaging.last_checkpoints(folder, 2)
            ],
            ["ckpt-4.keras", "ckpt-10.keras"],
        )
        with self.assertRaisesRegex(ValueError, re.escape("num_checkpoints=4")):
            averaging.last_checkpoints(folder, 4)
        # Not every checkpoint (found[-0:]), nor the oldest.
        for count in (0, -1):
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "`num_checkpoints` must be at least 1. "
                    f"Received: num_checkpoints={count}"
                ),
            ):
                averaging.last_checkpoints(folder, count)
        # By default, every one the run kept (train.py keeps the paper's
        # count for the preset: 5, or 20 for big).
        self.assertEqual(
            [os.path.basename(p) for p in averaging.last_checkpoints(folder)],
            ["ckpt-2.keras", "ckpt-4.keras", "ckpt-10.keras"],
        )

    def test_by_default_every_kept_checkpoint_is_averaged(self):
        # 20 for a big run (the paper's window): not a smaller default.
        # Only the names count here.
        folder = fixtures.tempdir(self)
        checkpoint_dir = os.path.join(folder, "checkpoints")
        os.makedirs(checkpoint_dir)
        paths = [
            fixtures.write(checkpoint_path(checkpoint_dir, step), "")
            for step in range(1000, 21000, 1000)
        ]
        self.assertEqual(averaging.last_checkpoints(folder), paths)

    def test_no_paths_are_refused(self):
        with self.assertRaisesRegex(
            ValueError,
            r"at least one `.keras` checkpoint. Received: paths=\[\]",
        ):
            averaging.average_models([])

    def test_a_folder_without_checkpoints_is_named(self):
        folder = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            ValueError,
            re.escape(f"No checkpoints in {folder}/checkpoints")
            + ".*training run as model_dir",
        ):
            averaging.last_checkpoints(folder, 1)

    def test_output_is_checked_before_any_checkpoint_is_loaded(self):
        folder = fixtures.tempdir(self)
        write_checkpoints(folder, [1])
        os.makedirs(os.path.join(folder, "folder.keras"))
        for output, problem in (
            ("avg.h5", "must be a .keras file"),
            ("missing/avg.keras", "must be in an existing directory"),
            (
                "checkpoints/ckpt-1.keras",
                "must not be one of the run's checkpoints",
            ),
            # The run's final model, which translate and export read: it
            # was replaced silently.
            ("model.keras", "must not be the run's final model (model.keras"),
            ("best_model.keras", "must not be the run's best model (best_"),
            # Renamed onto only after the averaging: it failed then.
            ("folder.keras", "is a directory; name the .keras file to write"),
        ):
            with self.assertRaisesRegex(ValueError, re.escape(problem)):
                averaging.check_output(os.path.join(folder, output), folder)
        averaging.check_output(os.path.join(folder, "averaged.keras"), folder)
        # (Root, who runs the tests here, may write anywhere.)
        with (
            mock.patch.object(averaging.os, "access", return_value=False),
            self.assertRaisesRegex(
                ValueError,
                re.escape(f"must be in a writable directory ({folder} is not)"),
            ),
        ):
            averaging.check_output(
                os.path.join(folder, "averaged.keras"), folder
            )

    def test_checkpoints_of_other_configs_are_refused(self):
        folder = fixtures.tempdir(self)
        write_checkpoints(folder, [1])
        # Of the same shapes: averaging them would not fail by itself.
        other = build_transformer(tiny_config(dropout=0.3))
        other.save(os.path.join(folder, "other.keras"))
        with self.assertRaisesRegex(ValueError, "must share one model config"):
            averaging.average_models(
                [checkpoint_path(os.path.join(folder, "checkpoints"), 1)]
                + [os.path.join(folder, "other.keras")]
            )

    def test_failed_save_is_one_line_and_leaves_no_partial_file(self):
        folder = fixtures.tempdir(self)
        write_checkpoints(folder, [1])
        before = sorted(os.listdir(folder))
        flag_values = flags.FlagValues()
        average_checkpoints.define_flags(flag_values)
        flag_values(["average_checkpoints", f"--model_dir={folder}"])
        stderr = io.StringIO()
        full = tf.errors.ResourceExhaustedError(None, None, "No space left")
        with (
            mock.patch.object(tf.io.gfile, "rename", side_effect=full),
            contextlib.redirect_stderr(stderr),
        ):
            status = average_checkpoints.main(
                ["average_checkpoints"], flag_values
            )
        self.assertEqual(
            (status, stderr.getvalue()),
            (1, "average_checkpoints: error: No space left\n"),
        )
        self.assertEqual(sorted(os.listdir(folder)), before)

    @pytest.mark.slow
    def test_command_refuses_a_directory_as_output_before_loading(self):
        # It was renamed onto only after every checkpoint was loaded and
        # averaged: an IsADirectoryError traceback and a partial file left.
        # The checkpoint is damaged: loading it first would fail otherwise.
        folder = fixtures.tempdir(self)
        os.makedirs(os.path.join(folder, "checkpoints"))
        with open(
            checkpoint_path(os.path.join(folder, "checkpoints"), 1), "w"
        ) as f:
            f.write("damaged")
        output = os.path.join(folder, "avg.keras")
        os.makedirs(output)
        result = run_command(
            f"--model_dir={folder}", "--num_checkpoints=1", f"--output={output}"
        )
        self.assertEqual(result.returncode, 1)
        self.assertTrue(
            result.stderr.endswith(
                "average_checkpoints: error: `output` is a directory; name "
                f"the .keras file to write, e.g. {output}/averaged.keras. "
                f"Received: output={output}\n"
            ),
            result.stderr[-2000:],
        )
        self.assertEqual(
            sorted(os.listdir(folder)), ["avg.keras", "checkpoints"]
        )

    @pytest.mark.slow
    def test_command_names_a_model_dir_that_is_not_a_run(self):
        # Not "`output` must be in an existing directory" for the default
        # --output inside the missing directory.
        folder = os.path.join(fixtures.tempdir(self), "missing")
        result = run_command(f"--model_dir={folder}")
        self.assertEqual(result.returncode, 1)
        self.assertIn(
            "average_checkpoints: error: "
            f"No checkpoints in {folder}/checkpoints",
            result.stderr,
        )
        self.assertIn(f"Received: model_dir={folder}\n", result.stderr)

    @pytest.mark.slow
    def test_command_writes_the_mean_of_the_last_checkpoints(self):
        folder = fixtures.tempdir(self)
        models = write_checkpoints(folder, [1, 2, 3])
        output = os.path.join(folder, "avg.keras")
        result = run_command(
            f"--model_dir={folder}", "--num_checkpoints=2", f"--output={output}"
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        averaged = keras.saving.load_model(output, compile=False)
        for got, b, c in zip(
            averaged.get_weights(),
            models[1].get_weights(),
            models[2].get_weights(),
        ):
            self.assertAllClose(got, (b + c) / 2)
        missing = run_command(f"--model_dir={folder}", "--num_checkpoints=9")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("kept 3 checkpoints", missing.stderr)
        self.assertNotIn("Traceback", missing.stderr)
        self.assertFalse(os.path.exists(os.path.join(folder, "averaged.keras")))
