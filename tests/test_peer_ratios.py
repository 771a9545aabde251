"""benchmarks/peer_ratios.py: our harness rows divided by the peers' of the
same run."""

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "benchmarks", "peer_ratios.py"
)


def row(peer, speed, rss, args="", status="ok", workload="decode", probes=None):
    speed_key = "tgt_tokens_per_s" if workload == "train" else "sentences_per_s"
    return {
        "peer": peer,
        "config": "base",
        "workload": workload,
        "status": status,
        speed_key: speed,
        "peak_rss_mib": rss,
        # The harness's tag of the plan row (its error lines have it too).
        "runner": {
            "tag": f"{peer}-{workload}{args}",
            "args": args,
            "probe_gflops": probes or [],
        },
    }


def ratios(tmp_path, runs):
    """peer_ratios.py's results on harness output files of `runs`."""
    paths = []
    for index, rows in enumerate(runs):
        paths.append(str(tmp_path / f"run{index}.jsonl"))
        with open(paths[-1], "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    output = subprocess.run(
        [sys.executable, SCRIPT, *paths],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(line) for line in output.splitlines()]


def test_ratios_are_taken_within_each_run(tmp_path):
    runs = [
        [
            {
                "peer": "machine",
                "workload": "peak",
                "config": "-",
                "status": "ok",
            },
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
    (result,) = ratios(tmp_path, runs)

    assert (result["config"], result["workload"]) == ("base", "decode")
    assert result["variant"] == "--saved_model"
    assert (result["median"], result["min"], result["max"]) == (9.0, 6.0, 12.0)
    assert result["vs_best_peer"] == [1.2, 0.75]
    assert result["best_peer"] == [
        "ctranslate2 - 10.0",
        "tf-model-garden --xla 8.0",
    ]
    assert result["vs_ctranslate2"] == [1.2, 1.2]
    assert result["vs_model_garden"] == [3.0]  # Its stock row only.
    assert result["peak_rss_mib"] == 1500
    assert result["leanest_peer_rss_mib"] == 550  # The median of 500 and 600.
    assert result["clean_vs_best_peer"] == []  # No probes: drift unknown.


def test_rounds_of_one_run_pair_in_order_and_drifted_pairs_are_marked(tmp_path):
    fast, slow = [200.0, 201.0], [200.0, 150.0]  # FMA probes before and after
    run = [
        # Round 1: the machine ran at its usual speed for every row.
        row("tf-model-garden", 2.0, 1500, probes=fast),
        row("ctranslate2", 8.0, 500, probes=fast),
        row("keras-transformer", 10.0, 1400, "--saved_model", probes=fast),
        # Round 2: Model Garden failed, CTranslate2's row drifted (a probe
        # 25 % low).
        {
            **row("tf-model-garden", None, None, status="error"),
            "peer": "mg/b.py",
        },
        row("ctranslate2", 6.0, 700, probes=slow),
        row(
            "keras-transformer",
            9.5,
            1400,
            "--saved_model",
            probes=[192.0, 199.0],
        ),
        # Round 3.
        row("tf-model-garden", 2.1, 1500, probes=fast),
        row("ctranslate2", 8.4, 500, probes=fast),
        row("keras-transformer", 10.5, 1600, "--saved_model", probes=fast),
        # Round 4: probes as usual, but our row ran a third below its best
        # round (a disturbance the probes between rows did not see).
        row("tf-model-garden", 2.0, 1500, probes=fast),
        row("ctranslate2", 8.2, 500, probes=fast),
        row("keras-transformer", 7.0, 1400, "--saved_model", probes=fast),
    ]
    (result,) = ratios(tmp_path, [run])

    assert (result["median"], result["min"], result["max"]) == (9.75, 7.0, 10.5)
    assert result["vs_best_peer"] == [1.25, 1.58, 1.25, 0.85]
    assert result["best_peer"] == [
        "ctranslate2 - 8.0",
        "ctranslate2 - 6.0",
        "ctranslate2 - 8.4",
        "ctranslate2 - 8.2",
    ]
    assert result["vs_ctranslate2"] == [1.25, 1.58, 1.25, 0.85]
    # Rounds 1, 3 and 4: the failed row does not shift the pairs.
    assert result["vs_model_garden"] == [5.0, 5.0, 3.5]
    # Round 2: 192 is within 5 % of the run's best probe (201), 150 is not;
    # round 4: 7.0 is below 90 % of our best round (10.5).
    assert result["clean_vs_ctranslate2"] == [1.25, 1.25]
    assert result["clean_vs_model_garden"] == [5.0, 5.0]
    assert result["leanest_peer_rss_mib"] == 500  # Of 500, 700, 500, 500.


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    # `peer_ratios.py FILE | head -3`: the reader closes the pipe, here
    # before the first line, so that every write meets the closed pipe.
    path = tmp_path / "run.jsonl"
    rows = [row("keras-transformer", 9.0, 1400), row("ctranslate2", 8.0, 500)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    process = subprocess.Popen(
        [sys.executable, SCRIPT, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()
    stderr = process.stderr.read()
    process.wait()
    process.stderr.close()
    assert stderr == ""
    assert process.returncode == 1  # As Python exits on EPIPE.
