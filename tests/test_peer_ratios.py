"""benchmarks/peer_ratios.py: our harness rows divided by the peers' of the
same run."""

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "benchmarks", "peer_ratios.py"
)


def row(peer, speed, rss, args="", status="ok", workload="decode"):
    speed_key = "tgt_tokens_per_s" if workload == "train" else "sentences_per_s"
    return {
        "peer": peer,
        "config": "base",
        "workload": workload,
        "status": status,
        speed_key: speed,
        "peak_rss_mib": rss,
        "runner": {"args": args},
    }


def test_ratios_are_taken_within_each_run(tmp_path):
    runs = [
        [
            {"peer": "machine", "workload": "peak", "config": "-", "status": "ok"},
            row("keras-transformer", 12.0, 1400, "--saved_model"),
            row("ctranslate2", 10.0, 500),
            row("tf-model-garden", 4.0, 1500),
            row("keras-hub", 99.0, 100, status="error"),  # failed: not a peer
            row("hf-marian", 900.0, 50, workload="train"),  # another workload
        ],
        [
            row("keras-transformer", 6.0, 1600, "--saved_model"),
            row("ctranslate2", 5.0, 600),
            row("tf-model-garden", 8.0, 1400, "--xla"),  # fastest, a variant
        ],
    ]
    paths = []
    for index, rows in enumerate(runs):
        paths.append(str(tmp_path / f"run{index}.jsonl"))
        with open(paths[-1], "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    output = subprocess.run(
        [sys.executable, SCRIPT, *paths], check=True, capture_output=True, text=True
    ).stdout
    (result,) = [json.loads(line) for line in output.splitlines()]

    assert (result["config"], result["workload"]) == ("base", "decode")
    assert result["variant"] == "--saved_model"
    assert (result["median"], result["min"], result["max"]) == (9.0, 6.0, 12.0)
    assert result["vs_best_peer"] == [1.2, 0.75]
    assert result["best_peer"] == ["ctranslate2 - 10.0", "tf-model-garden --xla 8.0"]
    assert result["vs_ctranslate2"] == [1.2, 1.2]
    assert result["vs_model_garden"] == [3.0]  # Its stock row only.
    assert result["peak_rss_mib"] == 1500
    assert result["leanest_peer_rss_mib"] == 550  # The median of 500 and 600.
