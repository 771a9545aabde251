r"""The training step's matmuls, each alone, through TensorFlow's kernels
(oneDNN) and through XLA; one JSON line per product.

python benchmarks/matmul_shapes.py --config=base [--threads=1]

A base training step is ~90 % matmuls (benchmarks/PERFORMANCE.md), so a
step with XLA is about as fast as XLA:CPU's dot library runs these
products. Each projection x W ([N, I] x [I, O], N the step's target tokens)
comes with its backward pass's two: the input gradient dy W^T and the
weight gradient x^T dy, whose left operand is read transposed; then the
logits against the shared embedding E ([V, D]) and their two gradients.
TensorFlow's products are its 2-D `MatMul` (`tensorflow_gflop_per_s`) and
the same product as a batched matmul of one matrix with adjoint flags
(`tensorflow_batched_gflop_per_s`), the form the model's projections take
for dy W^T, and for x^T dy where x is the wider operand (`layers.project`):
oneDNN runs the two through different kernels.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags

from benchmarks import workloads

flags.DEFINE_enum("config", "base", ["small", "base"], "Model size.")
flags.DEFINE_integer(
    "threads",
    0,
    "TensorFlow's intra-op and inter-op threads (0: its defaults; 1: a "
    "product as it runs beside another one in a step).",
    lower_bound=0,
)
flags.DEFINE_integer("steps", 10, "Timed calls of each product.", lower_bound=1)
FLAGS = flags.FLAGS


def products(config):
    """(name, left shape, right shape, transpose_a, transpose_b) of a step."""
    rows = workloads.TRAIN["batch"] * workloads.TRAIN["tgt_len"]
    d_model, d_ff, vocab = (
        config["d_model"],
        config["d_ff"],
        config["vocab_size"],
    )
    listed = []
    for inputs, outputs in [
        (d_model, d_model),
        (d_model, d_ff),
        (d_ff, d_model),
    ]:
        kernel = f"{inputs}x{outputs}"
        listed += [
            (
                f"x W, W {kernel}",
                (rows, inputs),
                (inputs, outputs),
                False,
                False,
            ),
            (
                f"dy W^T, W {kernel}",
                (rows, outputs),
                (inputs, outputs),
                False,
                True,
            ),
            (
                f"x^T dy, W {kernel}",
                (rows, inputs),
                (rows, outputs),
                True,
                False,
            ),
        ]
    return listed + [
        ("logits h E^T", (rows, d_model), (vocab, d_model), False, True),
        ("d logits E", (rows, vocab), (vocab, d_model), False, False),
        ("d logits^T h", (rows, vocab), (rows, d_model), True, False),
    ]


def gflop_per_s(
    left, right, transpose_a, transpose_b, jit_compile, batched=False
):
    """One product's median speed over `--steps` calls; `batched`: as a
    `BatchMatMulV2` of [1, ...] operands."""
    import tensorflow as tf

    a = tf.random.normal(left)
    b = tf.random.normal(right)

    def product():
        if batched:
            return tf.linalg.matmul(
                a[None], b[None], adjoint_a=transpose_a, adjoint_b=transpose_b
            )[0]
        return tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    matmul = tf.function(product, jit_compile=jit_compile)
    median, _, _ = workloads.time_calls(
        lambda: matmul().numpy(), 1, FLAGS.steps
    )
    inner = left[0] if transpose_a else left[1]
    outer = (left[1] if transpose_a else left[0]) * (
        right[0] if transpose_b else right[1]
    )
    return 2 * inner * outer / median / 1e9


def main(argv):
    del argv
    workloads.set_threads(FLAGS.threads)
    for name, *product in products(workloads.CONFIGS[FLAGS.config]):
        row = {
            "benchmark": "matmul_shapes",
            "config": FLAGS.config,
            "threads": FLAGS.threads,
            "product": name,
            "left": product[0],
            "right": product[1],
        }
        for path, jit_compile, batched in [
            ("tensorflow", False, False),
            ("tensorflow_batched", False, True),
            ("xla", True, False),
        ]:
            speed = gflop_per_s(*product, jit_compile, batched)
            row[f"{path}_gflop_per_s"] = round(speed, 1)
        print(json.dumps(row))


if __name__ == "__main__":
    app.run(main)
