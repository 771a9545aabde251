"""What the command-line tools share: input files, errors, progress."""

import sys


def fail(command: str, error: Exception) -> int:
    """Prints a user error as one line (no traceback); the exit status."""
    print(f"{command}: error: {error}", file=sys.stderr)
    return 1


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
