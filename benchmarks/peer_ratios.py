r"""Our harness rows against the peers, run by run; JSON lines.

  python benchmarks/peer_ratios.py benchmarks/results/peers-20261123-*.jsonl

Timings on the shared machines drift between runs, so each of our rows is
divided by the peers' rows of the same run: the fastest peer row of the
workload (any variant, XLA included), CTranslate2 and TF Model Garden.
Prints one line per row of ours with its median over the runs and the
per-run ratios (the README's performance table).
"""

import json
import statistics
import sys

OURS = "keras-transformer"


def read_run(path):
    """{(peer, variant, config, workload): (throughput, peak RSS MiB)} of
    the successful rows of one harness output file."""
    rows = {}
    with open(path) as lines:
        for line in lines:
            row = json.loads(line)
            if row.get("status") != "ok" or "config" not in row:
                continue  # Failed rows and the machine probe.
            variant = row.get("runner", {}).get("args") or "-"
            train = row["workload"] == "train"
            speed_key = "tgt_tokens_per_s" if train else "sentences_per_s"
            if row.get(speed_key) is None:
                continue  # A row that timed nothing (e.g. --help).
            key = (row["peer"], variant, row["config"], row["workload"])
            rows[key] = (row[speed_key], row.get("peak_rss_mib"))
    return rows


def compare(runs):
    """One dict per row of ours, with its per-run ratios to the peers."""
    ours = sorted({key for run in runs for key in run if key[0] == OURS})
    for key in ours:
        _, variant, config, workload = key
        present = [run for run in runs if key in run]
        speeds = [run[key][0] for run in present]
        result = {
            "config": config,
            "workload": workload,
            "variant": variant,
            "median": round(statistics.median(speeds), 2),
            "min": min(speeds),
            "max": max(speeds),
            "unit": "target tokens/s" if workload == "train" else "sentences/s",
            "peak_rss_mib": round(statistics.median(run[key][1] for run in present)),
            "vs_best_peer": [],
            "best_peer": [],
            "vs_ctranslate2": [],
            "vs_model_garden": [],
        }
        leanest = []
        for run in present:
            peers = {
                other: value
                for other, value in run.items()
                if other[0] != OURS and other[2:] == (config, workload)
            }
            if not peers:
                continue
            best = max(peers, key=lambda other: peers[other][0])
            result["vs_best_peer"].append(round(run[key][0] / peers[best][0], 2))
            result["best_peer"].append(f"{best[0]} {best[1]} {peers[best][0]}")
            for name, ratios in (
                ("ctranslate2", result["vs_ctranslate2"]),
                ("tf-model-garden", result["vs_model_garden"]),
            ):
                for other, value in peers.items():
                    if other[0] == name and other[1] == "-":
                        ratios.append(round(run[key][0] / value[0], 2))
            leanest.append(min(value[1] for value in peers.values()))
        result["leanest_peer_rss_mib"] = (
            round(statistics.median(leanest)) if leanest else None
        )
        yield result


def main(paths):
    if not paths:
        sys.exit("usage: python benchmarks/peer_ratios.py RESULTS.jsonl [...]")
    for result in compare([read_run(path) for path in paths]):
        print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
