"""What the command-line tools share: errors, progress, the threads flag,
the check that an output file is not an input."""

import sys

from absl import flags


def fail(command: str, error: Exception) -> int:
    """Prints a user error as one line (no traceback); the exit status."""
    print(f"{command}: error: {error}", file=sys.stderr)
    return 1


def stopped(command: str, preempted) -> int:
    """Prints how a signal stopped training (`preemption.TrainingPreempted`)
    as one line; the exit status of a process the signal ended."""
    print(f"{command}: {preempted}", file=sys.stderr)
    return preempted.exit_status


def progress_printer(stream=sys.stderr):
    """An `on_batch(done, total)` that draws a progress bar on `stream`."""

    def on_batch(done, total):
        width = 30
        filled = width * done // max(total, 1)
        end = "\n" if done >= total else ""
        stream.write(
            f"\r[{'=' * filled}{'.' * (width - filled)}] {done}/{total} sentences{end}"
        )
        stream.flush()

    return on_batch


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
