r"""Beam-search throughput (beam 4, 40 steps, EOS disabled); JSON lines.

  python benchmarks/decode.py --config=small --batch_sizes=1,8,32

For each batch size: through Python (`tf.function`) and through a reloaded
SavedModel, each with and without XLA; with more than one of those, also
checks that all return the same hypotheses. `peak_rss_mib` is the process's
peak so far: each row's includes the rows before it (the peer harness
measures each row in a process of its own).
"""

import contextlib
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags

from benchmarks import workloads

flags.DEFINE_enum("config", "small", ["small", "base"], "Model size.")
flags.DEFINE_list("batch_sizes", ["1", "8", "32"], "Sentences per call.")
flags.DEFINE_list("paths", ["python", "saved_model"], "Where to decode.")
flags.DEFINE_list("xla", ["false", "true"], "jit_compile settings.")
flags.register_validator(
    "paths",
    lambda paths: set(paths) <= {"python", "saved_model"},
    "--paths takes python and saved_model.",
)
flags.register_validator(
    "xla",
    lambda xla: set(xla) <= {"false", "true"},
    "--xla takes false and true.",
)
flags.DEFINE_integer("warmup", 1, "Untimed calls.", lower_bound=0)
flags.DEFINE_integer("steps", 2, "Timed calls.", lower_bound=1)
flags.DEFINE_integer(
    "intra_op_threads",
    0,
    "TensorFlow threads per op, for every row (0: its default, one per core; 1 "
    "suits the two parallel searches without XLA, not XLA's one search).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "parallel_searches",
    0,
    "Side by side searches per call without XLA (0: as Translator searches; "
    "1 with XLA, which always runs one).",
    lower_bound=0,
)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    import tensorflow as tf

    # Fixed once TensorFlow's runtime starts, so before the first op.
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    model = workloads.build_model(FLAGS.config)
    steps = workloads.DECODE["steps"]
    searches = {
        xla: workloads.parallel_searches_for(xla, FLAGS.parallel_searches)
        for xla in (False, True)
    }
    for batch in map(int, FLAGS.batch_sizes):
        outputs = {}
        for xla in (value == "true" for value in FLAGS.xla):
            for path in FLAGS.paths:
                with (
                    tempfile.TemporaryDirectory()
                    if path == "saved_model"
                    else contextlib.nullcontext()
                ) as folder:
                    call, _ = workloads.decode_fn(
                        model, xla, batch, folder, searches[xla]
                    )
                    median, first, times = workloads.time_calls(
                        call, FLAGS.warmup, FLAGS.steps
                    )
                    outputs[(path, xla)] = call()
                print(
                    json.dumps(
                        {
                            "benchmark": "decode",
                            "config": FLAGS.config,
                            "batch": batch,
                            "beam": workloads.DECODE["beam"],
                            "path": path,
                            "jit_compile": xla,
                            "intra_op_threads": FLAGS.intra_op_threads,
                            "parallel_searches": searches[xla],
                            "median_s": round(median, 4),
                            "step_s": [round(t, 4) for t in times],
                            "first_call_s": round(first, 2),
                            "sentences_per_s": round(batch / median, 2),
                            "gen_tokens_per_s": round(
                                batch * steps / median, 1
                            ),
                            "peak_rss_mib": round(workloads.peak_rss_mib()),
                        }
                    ),
                    flush=True,
                )
        if len(outputs) < 2:
            continue  # Nothing to compare.
        same = all(
            (value == next(iter(outputs.values()))).all()
            for value in outputs.values()
        )
        print(
            json.dumps(
                {
                    "benchmark": "decode",
                    "batch": batch,
                    "all_paths_identical": bool(same),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    app.run(main)
