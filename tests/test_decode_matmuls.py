"""benchmarks/decode_matmuls.py: a beam-search step's matmuls, alone."""

import json
import subprocess
import sys

from benchmarks import decode_matmuls, workloads


def test_a_step_has_the_models_products():
    config = workloads.CONFIGS["base"]
    d_model, d_ff = config["d_model"], config["d_ff"]
    products = decode_matmuls.step_products(config)
    layers = products[: 6 * config["num_layers"]]
    logits = products[6 * config["num_layers"] :]
    assert all(columns == right[0] for columns, right in products)
    # Per layer: Q, K and V fused (3 D^2), three more D x D (the
    # self-attention's output, the cross-attention's query and output),
    # then D x F and F x D.
    for layer in range(config["num_layers"]):
        own = layers[6 * layer : 6 * layer + 6]
        assert sum(c * r[1] for c, r in own) == (
            6 * d_model * d_model + 2 * d_model * d_ff
        )
    # The blocks make up the pre-softmax matrix exactly.
    assert sum(right[1] for _, right in logits) == config["vocab_size"]
    assert {right[0] for _, right in logits} == {d_model}


def weight_elements(config, cached):
    """The elements of the weights a step reads, one count per key."""
    products = decode_matmuls.step_products(config)
    keys = decode_matmuls.weight_keys(products, config["num_layers"], cached)
    shapes = {key: right for (_, right), key in zip(products, keys)}
    assert all(
        shapes[key] == right for (_, right), key in zip(products, keys)
    ), "a shared weight must fit every product that reads it"
    return sum(rows * columns for rows, columns in shapes.values())


def test_distinct_and_cached_weights():
    config = workloads.CONFIGS["small"]
    d, f, vocab = config["d_model"], config["d_ff"], config["vocab_size"]
    layer = 6 * d * d + 2 * d * f
    assert weight_elements(config, False) == 3 * layer + d * vocab
    # One layer's weights and two logits blocks: 2048 columns, and the
    # last 8000 - 3 x 2048 = 1856.
    assert weight_elements(config, True) == layer + d * 2048 + d * 1856


def test_prints_the_step():
    output = subprocess.run(
        [
            sys.executable,
            decode_matmuls.__file__,
            "--config=small",
            "--rows=4",
            "--steps=1",
            "--cached",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (row,) = [json.loads(line) for line in output.splitlines()]
    config = workloads.CONFIGS["small"]
    assert row["products"] == 6 * 3 + 4  # 8000 columns: 4 blocks
    assert row["weight_mib"] == round(
        weight_elements(config, True) * 4 / 2**20, 1
    )
    assert row["rows"] == 4 and row["cached"] is True
    assert row["gflop_per_s"] > 0
