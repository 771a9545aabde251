r"""One beam-search step's matmuls, alone, at one thread; one JSON line.

  python benchmarks/decode_matmuls.py --config=base [--rows=64] [--cached]

A decoding step of the harness's workload runs, in each of our two side by
side searches (16 sentences x beam 4 = 64 rows, one intra-op thread each),
per decoder layer the fused self-attention projection [D, 3D], its output
[D, D], the cross-attention query and output [D, D] (its keys and values
are computed once a call) and the feed-forward's [D, F] and [F, D]; then
the logits against the pre-softmax matrix [D, V]. This times those
products in one `tf.function` with the weights they have in the model,
all distinct (base: 146.5 MiB a step, far more than the L2 and L3 caches
hold), or with `--cached` one layer's weights for every layer and one
[D, 2048] block for the logits (20.5 MiB at base: they stay in the L3). Each
product has an input of its own, so that Grappler merges none of them.
Two processes started at once show whether the two searches contend for
memory bandwidth.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags

from benchmarks import workloads

flags.DEFINE_enum("config", "base", ["small", "base"], "Model size.")
flags.DEFINE_integer(
    "rows",
    workloads.DECODE["batch"] // 2 * workloads.DECODE["beam"],
    "Rows of each product: one search's sentences x beam (default: the "
    "harness's 32 sentences in two searches, beam 4).",
    lower_bound=1,
)
flags.DEFINE_bool(
    "cached",
    False,
    "One layer's weights for all layers and one [D, 2048] block for the "
    "logits, instead of the model's distinct weights.",
)
flags.DEFINE_integer("steps", 40, "Timed steps a round.", lower_bound=1)
FLAGS = flags.FLAGS

_LOGITS_BLOCK = 2048  # Columns of the logits' block with --cached.
_PRODUCTS_PER_LAYER = 6


def step_products(config):
    """(left columns, right shape) of each product of a decoding step, the
    logits' split into `_LOGITS_BLOCK`-column blocks (the last one shorter):
    the same FLOPs as one [D, V] product."""
    d_model, d_ff, vocab = (
        config["d_model"],
        config["d_ff"],
        config["vocab_size"],
    )
    layer = [
        (d_model, (d_model, 3 * d_model)),  # self-attention Q, K, V
        (d_model, (d_model, d_model)),  # self-attention output
        (d_model, (d_model, d_model)),  # cross-attention query
        (d_model, (d_model, d_model)),  # cross-attention output
        (d_model, (d_model, d_ff)),
        (d_ff, (d_ff, d_model)),
    ]
    logits = [
        (d_model, (d_model, min(_LOGITS_BLOCK, vocab - start)))
        for start in range(0, vocab, _LOGITS_BLOCK)
    ]
    assert len(layer) == _PRODUCTS_PER_LAYER
    return layer * config["num_layers"] + logits


def weight_keys(products, num_layers, cached):
    """One key per product of `step_products`: products with one key share
    a weight. All distinct, or with `cached` the first layer's weights for
    every layer and one logits block for every block of its width (the
    last one is shorter)."""
    layer_products = _PRODUCTS_PER_LAYER * num_layers
    return [
        (
            (index % _PRODUCTS_PER_LAYER if index < layer_products else right)
            if cached
            else index
        )
        for index, (_, right) in enumerate(products)
    ]


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    workloads.set_threads(1)
    config = workloads.CONFIGS[FLAGS.config]
    products = step_products(config)
    rng = np.random.default_rng(0)

    def tensor(shape):
        return tf.constant(rng.standard_normal(shape, np.float32) * 0.02)

    weights = {}
    operands = []
    keys = weight_keys(products, config["num_layers"], FLAGS.cached)
    for (columns, right), key in zip(products, keys):
        if key not in weights:
            weights[key] = tensor(right)
        operands.append((tensor((FLAGS.rows, columns)), weights[key]))

    @tf.function
    def step():
        return tf.add_n([tf.reduce_sum(tf.matmul(x, w)) for x, w in operands])

    step()
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(FLAGS.steps):
            step().numpy()
        rounds.append((time.perf_counter() - start) / FLAGS.steps)
    best = min(rounds)
    flop = sum(2 * FLAGS.rows * r * c for _, (r, c) in products)
    weight_bytes = sum(int(np.prod(w.shape)) * 4 for w in weights.values())
    print(
        json.dumps(
            {
                "benchmark": "decode_matmuls",
                "config": FLAGS.config,
                "rows": FLAGS.rows,
                "cached": FLAGS.cached,
                "products": len(products),
                "weight_mib": round(weight_bytes / 2**20, 1),
                "step_ms": round(best * 1e3, 2),
                "gflop_per_s": round(flop / best / 1e9, 1),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
