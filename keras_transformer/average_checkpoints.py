r"""Averages the last N checkpoints of a run (paper, section 6.1).

  python -m keras_transformer.average_checkpoints --model_dir=runs/base

averages every checkpoint the run kept: train.py keeps the paper's count,
the last 5, or 20 for --preset=big (`--num_checkpoints` chooses fewer).

Writes `<model_dir>/averaged.keras` (or `--output`), which export
(`--checkpoint`) and evaluation accept like any `.keras` model.
"""

import os

from absl import app, flags

from keras_transformer.commands import fail, run_command

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Defines the average_checkpoints flags on `flag_values`."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_string("model_dir", None, "Training directory.", **fv)
    flags.DEFINE_integer(
        "num_checkpoints",
        None,
        "How many of the newest checkpoints (paper: 5 base, 20 big). "
        "Default: all the run kept (train.py keeps the paper's count for "
        "its preset, see --keep_checkpoints).",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_string(
        "output",
        None,
        "Output .keras file (default: <model_dir>/averaged.keras).",
        **fv,
    )
    flags.mark_flag_as_required("model_dir", flag_values=flag_values)


def main(argv, flag_values=FLAGS):
    """Averages the checkpoints of the flags (see the module docstring).

    Args:
        argv: the command line left after the flags (only the program).
        flag_values: the parsed flags.

    Returns:
        The exit status: 0, or 1 after a one-line error on stderr.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf

    from keras_transformer.training import averaging, callbacks

    model_dir = flag_values.model_dir
    output = flag_values.output or os.path.join(model_dir, "averaged.keras")
    try:
        # The run first: a mistyped --model_dir is named as such, not as a
        # missing directory of the default --output inside it.
        paths = averaging.last_checkpoints(
            model_dir, flag_values.num_checkpoints
        )
        averaging.check_output(output, model_dir)
        callbacks.save_model(averaging.average_models(paths), output)
    except (ValueError, OSError, TypeError, tf.errors.OpError) as error:
        # User errors, and a failed write (e.g. a full disk; OpError from
        # tf.io.gfile): one line.
        return fail("average_checkpoints", error)
    print(f"Averaged {len(paths)} checkpoints into {output}:")
    for path in paths:
        print(f"  {path}")
    return 0


def run():
    """Entry point of `python -m keras_transformer.average_checkpoints` and
    of the installed `keras-transformer-average-checkpoints` command."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
