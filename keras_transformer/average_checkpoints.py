r"""Averages the last N checkpoints of a run (paper, section 6.1).

  python -m keras_transformer.average_checkpoints --model_dir=runs/base \
      --num_checkpoints=5

Writes `<model_dir>/averaged.keras` (or `--output`), which export
(`--checkpoint`) and evaluation accept like any `.keras` model.
"""

import os
import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training directory.")
flags.DEFINE_integer(
    "num_checkpoints",
    5,
    "How many of the newest checkpoints (paper: 5 base, 20 big).",
    lower_bound=1,
)
flags.DEFINE_string(
    "output", None, "Output .keras file (default: <model_dir>/averaged.keras)."
)
flags.mark_flag_as_required("model_dir")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from keras_transformer.training import averaging

    output = FLAGS.output or os.path.join(FLAGS.model_dir, "averaged.keras")
    try:
        # The run first: a mistyped --model_dir is named as such, not as a
        # missing directory of the default --output inside it.
        paths = averaging.last_checkpoints(FLAGS.model_dir, FLAGS.num_checkpoints)
        averaging.check_output(output, FLAGS.model_dir)
        averaging.save_averaged(averaging.average_models(paths), output)
    except (ValueError, FileNotFoundError, TypeError) as error:
        print(f"average_checkpoints: error: {error}", file=sys.stderr)
        return 1
    print(f"Averaged {len(paths)} checkpoints into {output}:")
    for path in paths:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    app.run(main)
