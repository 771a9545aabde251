r"""Our harness rows against the peers, run by run and round by round; JSON
lines.

  python benchmarks/peer_ratios.py benchmarks/results/peers-20261123-*.jsonl

Timings on the shared machines drift between runs, so each of our rows is
divided by the peers' rows of the same run: the fastest peer row of the
workload (any variant, XLA included), CTranslate2 and TF Model Garden. A run
of `ROUNDS=N benchmarks/run_peers.sh` holds each row N times; the k-th row of
ours is divided by the k-th rows of the peers (a round's rows run minutes
apart at most).

The harness probes the machine's FMA peak before and after every row. A
ratio is also listed under `clean_...` when both rows' probes stayed within
`DRIFT_TOLERANCE` of the run's highest probe: the machine ran at its usual
speed for both. The probes do not see a disturbance in the middle of a row,
so with several rounds a row must also reach `STEADY_TOLERANCE` of its own
best round in the run.

Prints one line per row of ours with its median over the runs and the
ratios (the README's performance table).
"""

import json
import os
import statistics
import sys

OURS = "keras-transformer"
# Probes below this fraction of a run's highest mark a drifted row.
DRIFT_TOLERANCE = 0.95
# With several rounds, a row slower than this fraction of its best round in
# the run is marked as disturbed.
STEADY_TOLERANCE = 0.9


def read_run(path):
    """The rounds of one harness output file: a list of {(peer, variant,
    config, workload): (throughput, peak RSS MiB, lowest probe GFLOP/s or
    None)}, one dict per round of each (config, workload), in file order.

    A round of a workload ends where one of its plan rows (the harness's
    runner tag) comes again; failed rows count, so they do not shift the
    pairs.
    """
    rounds = []
    current = {}  # (config, workload) -> (tags seen, the round being read)
    with open(path) as lines:
        for line in lines:
            row = json.loads(line)
            if "config" not in row or "workload" not in row:
                continue  # The runner's summary.
            runner = row.get("runner", {})
            group = (row["config"], row["workload"])
            tag = runner.get("tag") or (row["peer"], runner.get("args"))
            if group not in current or tag in current[group][0]:
                current[group] = (set(), {})
                rounds.append(current[group][1])
            current[group][0].add(tag)
            train = row["workload"] == "train"
            speed_key = "tgt_tokens_per_s" if train else "sentences_per_s"
            if row.get("status") != "ok" or row.get(speed_key) is None:
                continue  # Failed rows, the machine probe, rows timing nothing.
            probes = [
                p for p in runner.get("probe_gflops") or [] if p is not None
            ]
            key = (row["peer"], runner.get("args") or "-", *group)
            current[group][1][key] = (
                row[speed_key],
                row.get("peak_rss_mib"),
                min(probes, default=None),
            )
    return [this_round for this_round in rounds if this_round]


def _clean(rows, best_probe, best_speeds):
    """Whether rows `{key: (throughput, RSS, probe)}` all ran with the
    machine at its usual speed: probes near the run's best, and each row
    near its own best round (`best_speeds`)."""
    return all(
        probe is not None
        and probe >= DRIFT_TOLERANCE * best_probe
        and speed >= STEADY_TOLERANCE * best_speeds[key]
        for key, (speed, _, probe) in rows.items()
    )


def _bests(run):
    """(the run's highest probe or None, {key: its row's best round})."""
    probes = [row[2] for rounds in run for row in rounds.values() if row[2]]
    best_speeds = {}
    for rounds in run:
        for key, (speed, _, _) in rounds.items():
            best_speeds[key] = max(best_speeds.get(key, 0), speed)
    return max(probes, default=None), best_speeds


def compare(runs):
    """One dict per row of ours, with its ratios to the peers, run by run
    and round by round."""
    ours = sorted(
        {
            key
            for run in runs
            for rounds in run
            for key in rounds
            if key[0] == OURS
        }
    )
    bests = [_bests(run) for run in runs]
    for key in ours:
        _, variant, config, workload = key
        present = [
            rounds[key] for run in runs for rounds in run if key in rounds
        ]
        speeds = [row[0] for row in present]
        result = {
            "config": config,
            "workload": workload,
            "variant": variant,
            "median": round(statistics.median(speeds), 2),
            "min": min(speeds),
            "max": max(speeds),
            "unit": "target tokens/s" if workload == "train" else "sentences/s",
            "peak_rss_mib": round(statistics.median(row[1] for row in present)),
            "vs_best_peer": [],
            "best_peer": [],
            "vs_ctranslate2": [],
            "vs_model_garden": [],
            "clean_vs_best_peer": [],
            "clean_vs_ctranslate2": [],
            "clean_vs_model_garden": [],
        }
        leanest = []
        for run, (best_probe, best_speeds) in zip(runs, bests):
            for this_round in run:
                if key not in this_round:
                    continue
                row = this_round[key]
                peers = {
                    other: value
                    for other, value in this_round.items()
                    if other[0] != OURS and other[2:] == (config, workload)
                }
                if not peers:
                    continue
                best = max(peers, key=lambda other: peers[other][0])
                result["best_peer"].append(
                    f"{best[0]} {best[1]} {peers[best][0]}"
                )
                compared = [("best_peer", best)]
                for name, label in (
                    ("ctranslate2", "ctranslate2"),
                    ("tf-model-garden", "model_garden"),
                ):
                    if (name, "-", config, workload) in peers:
                        compared.append((label, (name, "-", config, workload)))
                for label, other in compared:
                    ratio = round(row[0] / peers[other][0], 2)
                    result[f"vs_{label}"].append(ratio)
                    pair = {key: row, other: peers[other]}
                    if best_probe and _clean(pair, best_probe, best_speeds):
                        result[f"clean_vs_{label}"].append(ratio)
                leanest.append(min(value[1] for value in peers.values()))
        result["leanest_peer_rss_mib"] = (
            round(statistics.median(leanest)) if leanest else None
        )
        yield result


def main(paths):
    if not paths:
        sys.exit("usage: python benchmarks/peer_ratios.py RESULTS.jsonl [...]")
    runs = [read_run(path) for path in paths]
    try:
        for result in compare(runs):
            print(json.dumps(result))
        sys.stdout.flush()  # Here, so that a closed pipe is caught here too.
    except BrokenPipeError:
        # The reader stopped early (`| head`): no traceback. Python's own
        # flush at exit would fail again, so stdout goes to devnull first
        # (the idiom of the `signal` module's documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
