r"""Training-step throughput on the peer harness's workload; one JSON line.

python benchmarks/train_step.py --config=small [--jit_compile] [--steps=3]
    [--gradient_accumulation_steps=N] [--threads=1]

`step_s` lists the timed steps in order: the peer harness times the steps
after its warmup ones in a fresh process (`peers/common.py`), and the first
of them can still page in new memory (benchmarks/PERFORMANCE.md). MFU
against the measured peak is the harness row's (`benchmarks/run_peers.sh`
and the harness's `summarize.py`), with the peers' FLOP formula.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags

from benchmarks import workloads

flags.DEFINE_enum("config", "small", ["small", "base"], "Model size.")
flags.DEFINE_bool("jit_compile", False, "XLA for the training step.")
flags.DEFINE_integer(
    "gradient_accumulation_steps",
    1,
    "The step's 64 sentences as N batches of 64 / N (the same update).",
    lower_bound=1,
)
flags.register_validator(
    "gradient_accumulation_steps",
    lambda steps: workloads.TRAIN["batch"] % steps == 0,
    "--gradient_accumulation_steps must divide the step's 64 sentences.",
)
flags.DEFINE_integer("warmup", 1, "Untimed calls.", lower_bound=0)
flags.DEFINE_integer("steps", 3, "Timed calls.", lower_bound=1)
flags.DEFINE_integer(
    "threads",
    0,
    "TensorFlow's intra-op and inter-op threads (0: its defaults). At 1 the "
    "step's ops and XLA's thunks run one after another, so that a profile's "
    "times add up (benchmarks/PERFORMANCE.md).",
    lower_bound=0,
)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    workloads.set_threads(FLAGS.threads)
    model = workloads.build_model(FLAGS.config)
    step = workloads.train_step_fn(
        model,
        FLAGS.jit_compile,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
    )
    median, first, times = workloads.time_calls(step, FLAGS.warmup, FLAGS.steps)
    tokens = workloads.TRAIN["batch"] * workloads.TRAIN["tgt_len"]
    print(
        json.dumps(
            {
                "benchmark": "train_step",
                "config": FLAGS.config,
                "jit_compile": FLAGS.jit_compile,
                "gradient_accumulation_steps": (
                    FLAGS.gradient_accumulation_steps
                ),
                "threads": FLAGS.threads,
                "params": model.count_params(),
                "median_s": round(median, 4),
                "step_s": [round(t, 4) for t in times],
                "first_call_s": round(first, 2),
                "tgt_tokens_per_s": round(tokens / median, 1),
                "peak_rss_mib": round(workloads.peak_rss_mib()),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
