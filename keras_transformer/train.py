r"""Trains a Transformer: absl flags -> `trainer.run_training`.

  python -m keras_transformer.train --preset=base \
      --data=tfds:wmt14_translate/de-en --src_lang=en --tgt_lang=de \
      --model_dir=runs/base --strategy=mirrored --num_gpus=8

(`python train.py ...` in a checkout of the repository.) Rerun the same
command after a crash to resume. On SIGTERM (a preempted VM or pod),
training stops after the step under way, saves its backup there and exits
with status 143: the rerun resumes from that step. So does Ctrl-C (status
130); a second one stops at once. `--helpfull` lists every flag. Any field
of the model config can be overridden with `--override`, e.g.
`--override=dropout=0.3,num_layers=4`.
"""

import dataclasses
import math
import sys
import typing

from absl import app, flags

from keras_transformer import tokens
from keras_transformer.commands import fail, run_command, stopped
from keras_transformer.config import OPTIONAL_FIELDS, PRESETS, TransformerConfig
from keras_transformer.training import (
    distribution,
    preemption,
    run_checks,
    trainer,
)

FLAGS = flags.FLAGS

# Set by the shared vocabulary (--vocab_size), not by --override.
VOCABULARY_FIELDS = ("vocab_size", "source_vocab_size")
# The spellings of a bool field's --override value, as absl's boolean flags.
_BOOLS = {
    "true": True,
    "t": True,
    "1": True,
    "false": False,
    "f": False,
    "0": False,
}


def define_flags(flag_values=FLAGS):
    """Defines the training flags on `flag_values`."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_enum(
        "preset",
        "base",
        sorted(PRESETS),
        "Model preset (the paper's base/big, Table 3 rows, tiny).",
        **fv,
    )
    flags.DEFINE_list(
        "override",
        [],
        "Model config fields, e.g. dropout=0.3,num_layers=4.",
        **fv,
    )
    flags.DEFINE_float("dropout", None, "P_drop (default: the preset's).", **fv)
    flags.DEFINE_float(
        "label_smoothing", None, "eps_ls (default: the preset's).", **fv
    )
    flags.DEFINE_string(
        "data",
        "demo",
        "demo | text:PREFIX (PREFIX.SRC, "
        "PREFIX.TGT) | tsv:PATH | tfds:wmt14_translate/de-en"
        " (either direction).",
        **fv,
    )
    flags.DEFINE_string("src_lang", "en", "Source language code.", **fv)
    flags.DEFINE_string("tgt_lang", "de", "Target language code.", **fv)
    flags.DEFINE_string("data_dir", None, "TFDS data directory.", **fv)
    flags.DEFINE_integer(
        "vocab_size",
        None,
        "Shared subword vocabulary size (default "
        "37000 en-de, 32000 en-fr, 2000 demo).",
        lower_bound=tokens.MIN_VOCAB_SIZE,
        **fv,
    )
    flags.DEFINE_integer(
        "batch_tokens",
        32768,
        "Tokens per global batch and side, padding included (bucketed by "
        "the longer side, as tensor2tensor's batch_size): the default, "
        "tensor2tensor's 8 x 4096, holds the paper's ~25000 real tokens.",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "gradient_accumulation_steps",
        1,
        "Token batches per optimizer step: their gradients are summed and "
        "divided by their real target tokens, as one batch of N times "
        "--batch_tokens would be (e.g. the paper's 32768 on fewer GPUs).",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "train_steps",
        None,
        "Optimizer steps (default: the paper's, 300k for --preset=big, "
        "100k for the others).",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "warmup_steps",
        4000,
        "Learning-rate warmup steps (paper: 4000).",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_float(
        "learning_rate_scale",
        1.0,
        "Factor on the paper's learning rate (Eq. 3); positive.",
        **fv,
    )
    flags.DEFINE_integer(
        "steps_per_checkpoint",
        1000,
        "Steps between checkpoints and logs.",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "keep_checkpoints",
        None,
        "Checkpoints kept (default: the paper's averaging window, 20 for "
        "--preset=big, 5 for the others).",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "bleu_every_steps",
        0,
        "Dev BLEU and perplexity every N steps, keeping the model of the "
        "best BLEU as best_model.keras (0: at the end only).",
        lower_bound=0,
        **fv,
    )
    flags.DEFINE_integer(
        "bleu_max_sentences",
        500,
        "Dev sentences for BLEU and perplexity (0: neither).",
        lower_bound=0,
        **fv,
    )
    flags.DEFINE_integer(
        "early_stopping_patience",
        0,
        "End training once this many dev BLEU evaluations in a row "
        "(--bleu_every_steps) bring no better BLEU; the final model is that "
        "step's (0: train to --train_steps).",
        lower_bound=0,
        **fv,
    )
    flags.DEFINE_float(
        "early_stopping_min_delta",
        0.0,
        "BLEU points a dev evaluation must gain over the last one that "
        "counted as better to count too, as Keras's EarlyStopping(min_delta) "
        "(with --early_stopping_patience).",
        lower_bound=0.0,
        **fv,
    )
    flags.DEFINE_string(
        "model_dir",
        None,
        "Output directory; rerun with the same one to resume.",
        **fv,
    )
    flags.DEFINE_enum(
        "strategy",
        "default",
        distribution.STRATEGIES,
        "tf.distribute strategy; multi_worker "
        "reads TF_CONFIG, tpu needs --tpu.",
        **fv,
    )
    flags.DEFINE_string(
        "tpu",
        None,
        "The TPU of --strategy=tpu (required with it): its name, a "
        "grpc://IP:8470 address, or 'local' on a TPU VM.",
        **fv,
    )
    flags.DEFINE_integer(
        "worker_startup_timeout",
        distribution.DEFAULT_WORKER_STARTUP_TIMEOUT,
        "Seconds the workers of --strategy=multi_worker wait for each other "
        "at start-up before failing with the missing ones named (Ctrl-C "
        "ends the wait; SIGTERM does not); with --strategy=tpu, seconds a "
        "--tpu=grpc://IP:PORT address has to accept a connection.",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "num_gpus",
        0,
        "GPUs for --strategy=mirrored (0: all).",
        lower_bound=0,
        **fv,
    )
    flags.DEFINE_enum(
        "mixed_precision",
        "float32",
        distribution.PRECISIONS,
        "Compute precision (mixed_float16 adds loss scaling).",
        **fv,
    )
    flags.DEFINE_bool(
        "jit_compile",
        True,
        "XLA-compile the training step (also under tf.distribute).",
        **fv,
    )
    flags.DEFINE_integer(
        "seed",
        0,
        "Seed of initialization, data order and dropout, 0 to 2**32 - 1 (a "
        "rerun must pass the same one to resume).",
        lower_bound=0,
        upper_bound=run_checks.MAX_SEED,
        **fv,
    )
    flags.mark_flag_as_required("model_dir", **fv)
    flags.register_validator(
        "model_dir",
        lambda model_dir: model_dir is None or bool(model_dir.strip()),
        "--model_dir must name a directory, not be empty (an unset variable?): "
        "the run would write into the working directory.",
        **fv,
    )
    flags.register_validator(
        "learning_rate_scale",
        lambda scale: math.isfinite(scale) and scale > 0,
        "--learning_rate_scale must be a positive number: it multiplies "
        "the learning rate.",
        **fv,
    )
    flags.register_multi_flags_validator(
        ["preset", "train_steps", "steps_per_checkpoint"],
        lambda f: (
            training_length(f["preset"], f["train_steps"])[0]
            % f["steps_per_checkpoint"]
            == 0
        ),
        "--train_steps must be a multiple of --steps_per_checkpoint (fit runs "
        "whole checkpoint intervals): change either one.",
        **fv,
    )
    flags.register_multi_flags_validator(
        ["strategy", "num_gpus"],
        lambda f: f["num_gpus"] == 0 or f["strategy"] == "mirrored",
        "--num_gpus needs --strategy=mirrored (the other strategies would "
        "ignore it): add --strategy=mirrored or drop --num_gpus.",
        **fv,
    )
    flags.register_multi_flags_validator(
        ["bleu_every_steps", "steps_per_checkpoint"],
        lambda f: f["bleu_every_steps"] % f["steps_per_checkpoint"] == 0,
        "--bleu_every_steps must be a multiple of --steps_per_checkpoint.",
        **fv,
    )


def training_length(
    preset: str, train_steps: int | None, keep_checkpoints: int | None = None
) -> tuple[int, int]:
    """`(train_steps, keep_checkpoints)`: the flags, or where unset the
    paper's for the preset (section 5.2: big trained 300k steps, base 100k;
    section 6.1: the last 20 or 5 checkpoints averaged)."""
    paper_steps, paper_window = (300000, 20) if preset == "big" else (100000, 5)
    return train_steps or paper_steps, keep_checkpoints or paper_window


def parse_overrides(items: list[str]) -> dict:
    """`["dropout=0.3", "num_layers=4"]` -> typed config overrides.

    Args:
        items: the `--override` items, `FIELD=VALUE` each.

    Returns:
        A dict of config fields and their typed values.

    Raises:
        ValueError: for a malformed item, an unknown field, a vocabulary
            size (`--vocab_size` sets it) or a bad value.
    """
    fields = {
        f.name: f
        for f in dataclasses.fields(TransformerConfig)
        if f.name not in VOCABULARY_FIELDS
    }
    hints = typing.get_type_hints(TransformerConfig)
    overrides = {}
    for item in items:
        name, sep, text = item.partition("=")
        if name in overrides:
            # Neither value may silently win over the other.
            raise ValueError(
                f"--override sets {name} twice; pass it once. "
                f"Received: override={','.join(items)}"
            )
        if name in VOCABULARY_FIELDS:
            raise ValueError(
                "The one shared vocabulary sets the source and target "
                "vocabulary sizes: choose its size with --vocab_size, not "
                f"--override. Received: override={item!r}"
            )
        if not sep or name not in fields:
            raise ValueError(
                "--override items are FIELD=VALUE with FIELD one of "
                f"{', '.join(fields)}. Received: override={item!r}"
            )
        kind = hints[name]
        if typing.get_args(kind):  # `int | None`: an optional field's int
            kind = typing.get_args(kind)[0]
        optional = name in OPTIONAL_FIELDS
        try:
            if optional and text.lower() == "none":
                # Derived again (d_model / num_heads), as in the base preset.
                overrides[name] = None
            else:
                overrides[name] = (
                    _BOOLS[text.lower()] if kind is bool else kind(text)
                )
        except (KeyError, ValueError):
            article = "an" if kind.__name__[0] in "aeiou" else "a"
            raise ValueError(
                f"--override {name} needs {article} {kind.__name__} value"
                + (" (true or false)" if kind is bool else "")
                + (
                    " or none (derived from d_model / num_heads)"
                    if optional
                    else ""
                )
                + f". Received: override={item!r}"
            ) from None
    return overrides


def config_from_flags(flag_values=FLAGS) -> TransformerConfig:
    """The model config of the preset with the flag overrides applied.

    Raises:
        ValueError: as `parse_overrides`, for `--dropout` or
            `--label_smoothing` that disagrees with an `--override` of the
            same field, and for a config out of range.
    """
    overrides = parse_overrides(flag_values.override)
    for name in ("dropout", "label_smoothing"):
        value = flag_values[name].value
        if value is None:
            continue
        if name in overrides and overrides[name] != value:
            # Neither may silently win over the other.
            raise ValueError(
                f"--{name} and --override={name}=... disagree; pass one "
                f"of them. Received: {name}={value}, "
                f"override={name}={overrides[name]}"
            )
        overrides[name] = value
    return TransformerConfig.preset(flag_values.preset, **overrides)


def main(argv, flag_values=FLAGS):
    """Trains as the flags say; returns the exit status.

    Args:
        argv: the arguments absl left (only the program name).
        flag_values: the parsed flags.

    Returns:
        0 after training; 1 after a user error, printed as one line; 143
        (128 + 15) when SIGTERM stopped training, 130 for Ctrl-C (SIGINT),
        with the backup saved at the step it stopped (the line says so).

    Raises:
        app.UsageError: for arguments that are not flags.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        config = config_from_flags(flag_values)
        train_steps, keep_checkpoints = training_length(
            flag_values.preset,
            flag_values.train_steps,
            flag_values.keep_checkpoints,
        )
        # Before TensorFlow starts (run_training checks it per replica).
        run_checks.check_batch_tokens(
            flag_values.batch_tokens, config.max_length
        )
        result = trainer.run_training(
            config,
            data=flag_values.data,
            src_lang=flag_values.src_lang,
            tgt_lang=flag_values.tgt_lang,
            model_dir=flag_values.model_dir,
            train_steps=train_steps,
            warmup_steps=flag_values.warmup_steps,
            batch_tokens=flag_values.batch_tokens,
            gradient_accumulation_steps=flag_values.gradient_accumulation_steps,
            vocab_size=flag_values.vocab_size,
            learning_rate_scale=flag_values.learning_rate_scale,
            steps_per_checkpoint=flag_values.steps_per_checkpoint,
            keep_checkpoints=keep_checkpoints,
            bleu_every_steps=flag_values.bleu_every_steps,
            bleu_max_sentences=flag_values.bleu_max_sentences,
            early_stopping_patience=flag_values.early_stopping_patience,
            early_stopping_min_delta=flag_values.early_stopping_min_delta,
            strategy=flag_values.strategy,
            num_gpus=flag_values.num_gpus,
            tpu_address=flag_values.tpu,
            worker_startup_timeout=flag_values.worker_startup_timeout,
            mixed_precision=flag_values.mixed_precision,
            jit_compile=flag_values.jit_compile,
            seed=flag_values.seed,
            data_dir=flag_values.data_dir,
            # Redirected to a file, Keras's progress bar would write its
            # redraws (carriage returns, backspaces) into it: a line per
            # checkpoint interval instead.
            verbose="auto" if sys.stdout.isatty() else 2,
        )
    except trainer.USER_ERRORS as error:
        # User errors: one line, no TensorFlow traceback.
        return fail("train.py", error)
    except preemption.TrainingPreempted as preempted:
        return stopped("train.py", preempted)
    print(f"Training data: {result.data_stats.describe()}")
    print(f"Trained to step {result.step}: {result.model_path}")
    if result.stopped_early and result.improved_step is None:
        # A worker whose record of the best model is gone.
        print("Stopped early, on the first worker's decision.")
    elif result.stopped_early:
        evaluations = (
            result.step - result.improved_step
        ) // flag_values.bleu_every_steps
        gain = (
            f" more than {flag_values.early_stopping_min_delta:g}"
            if flag_values.early_stopping_min_delta
            else ""
        )
        print(
            f"Stopped early: no dev BLEU{gain} above step "
            f"{result.improved_step}'s in the {evaluations} evaluations "
            "after it."
        )
    if result.dev_bleu is not None:
        print(f"Dev BLEU: {result.dev_bleu:.2f}")
    if result.dev_perplexity is not None:
        print(f"Dev perplexity: {result.dev_perplexity:.3f}")
    if result.best_model_path is not None:
        print(
            f"Best dev BLEU: {result.best_dev_bleu:.2f} at step "
            f"{result.best_step}: {result.best_model_path}"
        )
    print(f"TensorBoard: tensorboard --logdir={result.log_dir}")
    return 0


def run():
    """Entry point of `python -m keras_transformer.train`, and of the installed
    `keras-transformer-train` command and `train.py`."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
