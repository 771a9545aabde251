"""Tests of train.py's flags: wrong values fail at once, clearly."""

import contextlib
import dataclasses
import io
import os
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import pytest
from absl import app, flags

from keras_transformer import train
from keras_transformer.training import trainer
from tests.test_case import TestCase

ROOT = os.path.dirname(os.path.dirname(__file__))


def parse(*args):
    flag_values = flags.FlagValues()
    train.define_flags(flag_values)
    flag_values(["train.py", "--model_dir=/tmp/unused", *args])
    return flag_values


def run_main(*args):
    """`train.main` on the flags; its exit status and stderr."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        status = train.main(["train.py"], parse(*args))
    return status, stderr.getvalue()


class TrainFlagsTest(TestCase):
    def test_preset_overrides_and_flags_make_the_config(self):
        config = train.config_from_flags(
            parse(
                "--preset=big",
                "--override=num_layers=4,positional=learned",
                "--dropout=0.2",
            )
        )
        self.assertEqual(config.d_model, 1024)
        self.assertEqual(config.num_layers, 4)
        self.assertEqual(config.positional, "learned")
        self.assertEqual(config.dropout, 0.2)

    def test_wrong_values_fail_while_parsing(self):
        for args, message in (
            (["--preset=huge"], "one of"),
            (["--strategy=horovod"], "mirrored"),
            (["--mixed_precision=fp8"], "mixed_bfloat16"),
            (["--batch_tokens=0"], "batch_tokens"),
            (
                ["--learning_rate_scale=0"],
                "--learning_rate_scale must be a positive",
            ),
            (
                ["--learning_rate_scale=nan"],
                "--learning_rate_scale must be a positive",
            ),
            # 4 special ids, 256 byte pieces and one character.
            (["--vocab_size=261"], "vocab_size=261: 261 is not integer >= 262"),
            (
                ["--train_steps=5", "--steps_per_checkpoint=2"],
                "multiple of --steps_per_checkpoint",
            ),
            # numpy's seeds are 32-bit: not a numpy error once training starts.
            (["--seed=-1"], "seed=-1: -1 is not an integer in the range"),
            (["--seed=4294967296"], "seed=4294967296"),
            # Without --strategy=mirrored it would train on one device.
            (["--num_gpus=8"], "--num_gpus needs --strategy=mirrored"),
            (["--num_gpus=2", "--strategy=one_device"], "strategy=one_device"),
            # It would train into the working directory.
            (
                ["--model_dir="],
                "--model_dir must name a directory, not be empty",
            ),
            (
                ["--bleu_every_steps=3", "--steps_per_checkpoint=2"],
                "--bleu_every_steps must be a multiple of "
                "--steps_per_checkpoint",
            ),
            (
                ["--gradient_accumulation_steps=0"],
                "gradient_accumulation_steps=0: 0 is not",
            ),
        ):
            with (
                self.subTest(args=args),
                self.assertRaisesRegex(flags.IllegalFlagValueError, message),
            ):
                parse(*args)

    def test_training_length_defaults_to_the_papers_for_the_preset(self):
        captured = {}

        def run_training(config, **kwargs):
            captured.update(kwargs)
            raise ValueError("stop here")

        self.enter_context(
            mock.patch.object(train.trainer, "run_training", run_training)
        )
        # Section 5.2: big trained 300k steps, base 100k; section 6.1: the
        # last 20 or 5 checkpoints averaged.
        for args, want in (
            (["--preset=big"], (300000, 20)),
            (["--preset=base"], (100000, 5)),
            (["--preset=C3"], (100000, 5)),
            (
                ["--preset=big", "--train_steps=2000", "--keep_checkpoints=3"],
                (2000, 3),
            ),
        ):
            with self.subTest(args=args):
                captured.clear()
                status, _ = run_main("--data=demo", *args)
                self.assertEqual(status, 1)
                got = captured["train_steps"], captured["keep_checkpoints"]
                self.assertEqual(got, want)
        # Keras's progress bar on a terminal; into a file (not a terminal),
        # a line per interval rather than the bar's redraws.
        for isatty, verbose in ((True, "auto"), (False, 2)):
            with mock.patch.object(
                train.sys.stdout, "isatty", return_value=isatty
            ):
                run_main("--data=demo")
            self.assertEqual(captured["verbose"], verbose)
        # The divisibility check sees the preset's default.
        parse("--preset=big", "--steps_per_checkpoint=150000")
        with self.assertRaisesRegex(
            flags.IllegalFlagValueError, "multiple of --steps_per_checkpoint"
        ):
            parse("--preset=base", "--steps_per_checkpoint=150000")

    def test_every_flag_reaches_run_training(self):
        captured = {}

        def run_training(config, **kwargs):
            captured.update(kwargs, config=config)
            raise ValueError("stop here")

        self.enter_context(
            mock.patch.object(train.trainer, "run_training", run_training)
        )
        # Each flag at a value other than its default.
        status, _ = run_main(
            "--preset=tiny",
            "--data=text:/corpus/train",
            "--src_lang=de",
            "--tgt_lang=en",
            "--data_dir=/data/tfds",
            "--vocab_size=300",
            "--batch_tokens=512",
            "--gradient_accumulation_steps=3",
            "--train_steps=40",
            "--warmup_steps=7",
            "--learning_rate_scale=0.5",
            "--steps_per_checkpoint=4",
            "--keep_checkpoints=2",
            "--bleu_every_steps=8",
            "--bleu_max_sentences=9",
            "--early_stopping_patience=3",
            "--early_stopping_min_delta=0.25",
            "--strategy=mirrored",
            "--num_gpus=2",
            "--worker_startup_timeout=30",
            "--mixed_precision=mixed_bfloat16",
            "--nojit_compile",
            "--seed=11",
        )
        self.assertEqual(status, 1)
        self.assertEqual(captured.pop("config").num_layers, 2)
        del captured["verbose"]  # The terminal's (tested above).
        self.assertEqual(
            captured,
            {
                "data": "text:/corpus/train",
                "src_lang": "de",
                "tgt_lang": "en",
                "model_dir": "/tmp/unused",
                "data_dir": "/data/tfds",
                "vocab_size": 300,
                "batch_tokens": 512,
                "gradient_accumulation_steps": 3,
                "train_steps": 40,
                "warmup_steps": 7,
                "learning_rate_scale": 0.5,
                "steps_per_checkpoint": 4,
                "keep_checkpoints": 2,
                "bleu_every_steps": 8,
                "bleu_max_sentences": 9,
                "early_stopping_patience": 3,
                "early_stopping_min_delta": 0.25,
                "strategy": "mirrored",
                "num_gpus": 2,
                "tpu_address": None,
                "worker_startup_timeout": 30,
                "mixed_precision": "mixed_bfloat16",
                "jit_compile": False,
                "seed": 11,
            },
        )

    def test_model_dir_and_nothing_else_is_required(self):
        flag_values = flags.FlagValues()
        train.define_flags(flag_values)
        with self.assertRaisesRegex(
            flags.IllegalFlagValueError,
            "--model_dir must have a value other than None",
        ):
            flag_values(["train.py"])
        # Not taken for a flag's value, nor ignored.
        self.enter_context(
            mock.patch.object(
                train.trainer, "run_training", side_effect=AssertionError
            )
        )
        with self.assertRaisesRegex(
            app.UsageError, r"Unexpected arguments: \['base'\]"
        ):
            train.main(["train.py", "base"], parse())

    def test_a_finished_run_prints_where_its_results_are(self):
        result = trainer.TrainingResult(
            step=40,
            model_path="/run/model.keras",
            vocab_path="/run/vocab.model",
            log_dir="/run/logs",
            checkpoint_dir="/run/checkpoints",
            dev_bleu=27.346,
            dev_perplexity=4.12345,
            best_model_path="/run/best_model.keras",
            best_step=30,
            best_dev_bleu=28.004,
            stopped_early=False,
            improved_step=None,
            tokens_per_second=1000.0,
            data_stats=mock.Mock(describe=lambda: "24 pairs"),
        )
        expected = (
            "Training data: 24 pairs\n"
            "Trained to step 40: /run/model.keras\n"
            "{}"
            "Dev BLEU: 27.35\n"
            "Dev perplexity: 4.123\n"
            "Best dev BLEU: 28.00 at step 30: /run/best_model.keras\n"
            "TensorBoard: tensorboard --logdir=/run/logs\n"
        )
        for improved_step, early_stopping_flags, line in (
            (None, [], ""),
            (
                30,
                # 2 evaluations after step 30's (a rerun may lower the
                # patience below their count).
                ["--bleu_every_steps=5", "--early_stopping_patience=1"],
                "Stopped early: no dev BLEU above step 30's in the 2 "
                "evaluations after it.\n",
            ),
            (
                # Before the best, whose gain was too small to count.
                20,
                [
                    "--bleu_every_steps=5",
                    "--early_stopping_patience=3",
                    "--early_stopping_min_delta=0.5",
                ],
                "Stopped early: no dev BLEU more than 0.5 above step 20's "
                "in the 4 evaluations after it.\n",
            ),
        ):
            printed = io.StringIO()
            with (
                mock.patch.object(
                    train.trainer,
                    "run_training",
                    return_value=dataclasses.replace(
                        result,
                        stopped_early=improved_step is not None,
                        improved_step=improved_step,
                    ),
                ),
                contextlib.redirect_stdout(printed),
            ):
                status, _ = run_main(
                    "--preset=tiny",
                    "--steps_per_checkpoint=5",
                    *early_stopping_flags,
                )
            self.assertEqual(status, 0)
            self.assertEqual(printed.getvalue(), expected.format(line))
        # A worker without the record of the best model.
        printed = io.StringIO()
        no_best = dataclasses.replace(
            result,
            stopped_early=True,
            best_model_path=None,
            best_step=None,
            best_dev_bleu=None,
        )
        with (
            mock.patch.object(
                train.trainer, "run_training", return_value=no_best
            ),
            contextlib.redirect_stdout(printed),
        ):
            run_main("--preset=tiny", "--steps_per_checkpoint=5")
        self.assertIn(
            "\nStopped early, on the first worker's decision.\nDev BLEU",
            printed.getvalue(),
        )

    def test_seed_bounds_are_numpys(self):
        self.assertEqual(parse("--seed=4294967295").seed, 2**32 - 1)
        self.assertEqual(parse("--seed=0").seed, 0)

    def test_dropout_flag_may_repeat_an_equal_override(self):
        config = train.config_from_flags(
            parse("--preset=tiny", "--override=dropout=0.3", "--dropout=0.3")
        )
        self.assertEqual(config.dropout, 0.3)

    def test_overrides_are_checked(self):
        with self.assertRaisesRegex(ValueError, "override='colour=red'"):
            train.parse_overrides(["colour=red"])
        with self.assertRaisesRegex(ValueError, "needs an int value. Received"):
            train.parse_overrides(["num_layers=many"])
        # Set twice, neither value wins silently.
        with self.assertRaisesRegex(
            ValueError,
            "^--override sets dropout twice; pass it once. "
            "Received: override=dropout=0.2,num_layers=2,dropout=0.3$",
        ):
            train.parse_overrides(
                ["dropout=0.2", "num_layers=2", "dropout=0.3"]
            )
        # A Table 3 row's key/value widths may be derived again.
        self.assertEqual(
            train.parse_overrides(["key_dim=None", "value_dim=8"]),
            {"key_dim": None, "value_dim": 8},
        )
        self.assertIsNone(
            train.config_from_flags(
                parse("--preset=A1", "--override=key_dim=none,value_dim=none")
            ).key_dim
        )
        with self.assertRaisesRegex(
            ValueError, r"needs an int value or none \(derived from d_model"
        ):
            train.parse_overrides(["key_dim=wide"])
        # A bool field takes absl's spellings; a typo is not False.
        for text, value in (("true", True), ("T", True), ("0", False)):
            self.assertEqual(
                train.parse_overrides([f"attention_bias={text}"]),
                {"attention_bias": value},
            )
        with self.assertRaisesRegex(
            ValueError,
            r"needs a bool value \(true or false\).*attention_bias=ture",
        ):
            train.parse_overrides(["attention_bias=ture"])
        # One shared vocabulary: its size is --vocab_size's.
        for item in ("vocab_size=400", "source_vocab_size=400"):
            with self.assertRaisesRegex(
                ValueError, f"with --vocab_size, not --override.*{item}"
            ):
                train.parse_overrides([item])

    def test_settings_fail_in_one_line_before_the_data_is_read(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        a_file = os.path.join(folder, "a_file")
        open(a_file, "w").close()
        common = (
            "--preset=tiny",
            "--override=max_length=64",
            # Reading it would fail: the errors come first.
            f"--data=text:{os.path.join(folder, 'missing')}",
            "--vocab_size=300",
        )
        run_dir = os.path.join(folder, "run")
        for args, message in (
            (
                ["--batch_tokens=63", f"--model_dir={run_dir}"],
                "batch_tokens=63, max_length=64",
            ),
            (
                ["--override=source_vocab_size=300", f"--model_dir={run_dir}"],
                "--vocab_size",
            ),
            ([f"--model_dir={a_file}"], f"existing file.*model_dir={a_file}"),
            # Neither one silently wins.
            (
                [
                    "--override=dropout=0.3",
                    "--dropout=0.2",
                    f"--model_dir={run_dir}",
                ],
                "--dropout and --override=dropout=... disagree.*"
                "Received: dropout=0.2, override=dropout=0.3",
            ),
            (
                [
                    "--bleu_every_steps=2",
                    "--bleu_max_sentences=0",
                    "--train_steps=2",
                    "--steps_per_checkpoint=2",
                    f"--model_dir={run_dir}",
                ],
                "bleu_max_sentences=0 turns off",
            ),
            (
                ["--strategy=tpu", f"--model_dir={run_dir}"],
                "needs the TPU.*--tpu.*tpu_address=None",
            ),
            (["--tpu=local", f"--model_dir={run_dir}"], "tpu_address='local'"),
        ):
            with self.subTest(args=args):
                status, stderr = run_main(*common, *args)
                self.assertEqual(status, 1)
                self.assertRegex(stderr, f"^train.py: error: .*{message}")
                self.assertEqual(stderr.count("\n"), 1)
                self.assertFalse(os.path.exists(run_dir))

    def test_settings_file_that_is_not_json_is_named(self):
        model_dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, model_dir)
        path = os.path.join(model_dir, "settings.json")
        with open(path, "w") as file:
            file.write("{")
        status, stderr = run_main(
            "--preset=tiny", "--data=demo", f"--model_dir={model_dir}"
        )
        self.assertEqual(status, 1)
        self.assertRegex(
            stderr,
            "^train.py: error: The training run's settings.json is not valid "
            f"JSON .*; repair or delete it. Received: {path}\n$",
        )

    @pytest.mark.slow
    def test_help_lists_the_training_flags(self):
        # They are keras_transformer.train's, not train.py's own.
        result = subprocess.run(
            [sys.executable, "train.py", "--helpshort"],
            check=False,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        for name in (
            "--preset",
            "--data",
            "--train_steps",
            "--strategy",
            "--tpu",
        ):
            self.assertIn(f"\n  {name}:", result.stdout)

    @pytest.mark.slow
    def test_bad_override_is_one_line_without_traceback(self):
        result = subprocess.run(
            [
                sys.executable,
                "train.py",
                "--preset=tiny",
                "--model_dir=/tmp/unused",
                "--override=num_layers=0",
            ],
            check=False,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        self.assertEqual(result.returncode, 1)
        self.assertIn("train.py: error:", result.stderr)
        self.assertIn("num_layers", result.stderr)
        self.assertNotIn("Traceback", result.stderr)
