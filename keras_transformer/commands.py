"""What the command-line tools share: how they run, errors, progress, and
the flags of those that translate."""

import sys

from absl import app, flags


def run_command(module_name: str, main, define_flags) -> None:
    """Runs a command's `main` with absl's `app.run`, however it started:
    `python -m keras_transformer.<command>`, a script of the repository
    (`train.py`) or an installed console script (`keras-transformer-train`).

    absl's --help and --helpshort list the key flags of the main module,
    which absl names by `sys.argv[0]`; a command's flags are key to the
    module that defines them, so they are made the main module's too.

    Args:
        module_name: the `__name__` of the command's module.
        main: its `main(argv)`.
        define_flags: its `define_flags()`, which defines its flags.
    """
    define_flags()
    # Under `python -m`, absl already registered them as sys.argv[0]'s.
    if module_name != "__main__":
        for flag in flags.FLAGS.get_key_flags_for_module(module_name):
            flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
        # --help starts with the main module's docstring; a console
        # script's has none.
        script = sys.modules["__main__"]
        if not script.__doc__:
            script.__doc__ = sys.modules[module_name].__doc__
    app.run(main)


def fail(command: str, error: Exception) -> int:
    """Prints a user error as one line (no traceback); the exit status."""
    print(f"{command}: error: {error}", file=sys.stderr)
    return 1


def stopped(command: str, preempted) -> int:
    """Prints how a signal stopped training (`preemption.TrainingPreempted`)
    as one line; the exit status of a process the signal ended."""
    print(f"{command}: {preempted}", file=sys.stderr)
    return preempted.exit_status


def progress_printer(stream=None):
    """An `on_batch(done, total)` that draws a progress bar on `stream`
    (default: `sys.stderr` when it draws, so that a redirection holds)."""

    def on_batch(done, total):
        out = stream or sys.stderr
        width = 30
        filled = width * done // max(total, 1)
        end = "\n" if done >= total else ""
        out.write(
            f"\r[{'=' * filled}{'.' * (width - filled)}] "
            f"{done}/{total} sentences{end}"
        )
        out.flush()

    return on_batch


def define_translation_flags(flag_values=flags.FLAGS):
    """Defines what the commands that translate share: the required
    `--model`, `--vocab`, `--batch_size`, the decoding settings
    (`decoding_settings`) and `--intra_op_threads`. They are key flags of
    this module; the command adopts them (`flags.adopt_module_key_flags`)
    for its --help."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_string(
        "model",
        None,
        "Training directory, .keras file or SavedModel directory.",
        **fv,
    )
    flags.DEFINE_string(
        "vocab",
        None,
        "Sentencepiece model for a .keras model (default: found beside it).",
        **fv,
    )
    flags.DEFINE_integer(
        "batch_size", 32, "Sentences per batch.", lower_bound=1, **fv
    )
    # The paper tuned the beam and alpha on the dev set (section 6.1); an
    # export decodes with what it was exported with.
    keras_only = "for a training directory or .keras model (not an export)"
    flags.DEFINE_integer(
        "beam_size",
        None,
        f"Beam size K {keras_only}. Default: 4, the paper's.",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_float(
        "alpha",
        None,
        f"Length penalty alpha {keras_only}. Default: 0.6, the paper's.",
        lower_bound=0.0,
        **fv,
    )
    flags.DEFINE_integer(
        "length_offset",
        None,
        "Output tokens allowed beyond the input length "
        f"{keras_only}. Default: 50, the paper's.",
        lower_bound=0,
        **fv,
    )
    define_threads_flag(flag_values)
    flags.mark_flag_as_required("model", flag_values=flag_values)


# `inference.load_translator`'s decoding settings, flags of the same names.
DECODING_FLAGS = ("beam_size", "alpha", "length_offset")


def decoding_settings(flag_values=flags.FLAGS) -> dict:
    """The `DECODING_FLAGS` that were passed, as keyword arguments of
    `inference.load_translator`."""
    return {
        name: flag_values[name].value
        for name in DECODING_FLAGS
        if flag_values[name].value is not None
    }


def define_threads_flag(flag_values=flags.FLAGS):
    """Defines `--intra_op_threads` for a command that only decodes."""
    flags.DEFINE_integer(
        "intra_op_threads",
        None,
        "TensorFlow threads per op. Default: cores / the beam searches run "
        "side by side (2, or what a SavedModel was exported with; 1 thread on "
        "2 cores), so that they do not share one pool; TensorFlow's default "
        "for a SavedModel exported with --jit_compile. 0 is TensorFlow's "
        "default, one per core.",
        lower_bound=0,
        flag_values=flag_values,
    )
