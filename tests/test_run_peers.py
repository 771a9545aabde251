"""benchmarks/run_peers.sh: the harness's plan with our rows, grouped by
workload, handed to the harness's runner."""

import os
import subprocess

import pytest

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "benchmarks", "run_peers.sh"
)
HARNESS_PLAN = """\
# columns: tier venv script config workload [args]
core  torch  peak_flops.py  -      peak
core  torch  a_peer.py      small  train
core  torch  a_peer.py      small  decode
core  mg     b_peer.py      small  train
full  mg     b_peer.py      base   train   --xla
"""


def run_peers(tmp_path, order=None, installed=True, rounds=None):
    """Runs the script against a fake harness whose runner copies the plan
    it is given, with a fake environment for our rows whose Python imports
    keras_transformer or not; returns (completed process, that plan's rows)."""
    harness = tmp_path / "bench"
    (harness / "peers").mkdir(parents=True)
    (harness / "plan.txt").write_text(HARNESS_PLAN)
    # The runner records the plan, the link to our row and the output file.
    (harness / "run_peers.sh").write_text(
        'cp "$PLAN" "$PLAN_COPY"\n'
        'readlink "$(dirname "$0")/peers/keras_transformer_peer.py" '
        '> "$PLAN_COPY.link"\n'
        'echo "$BENCH_OUT" > "$PLAN_COPY.out"\n'
    )
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nexit {0 if installed else 1}\n")
    python.chmod(0o755)
    env = dict(
        os.environ,
        PLAN_COPY=str(tmp_path / "plan"),
        VENV_ours=str(tmp_path / "venv"),
    )
    for name, value in (("ORDER", order), ("ROUNDS", rounds)):
        env.pop(name, None)
        if value is not None:
            env[name] = value
    done = subprocess.run(
        ["bash", SCRIPT, str(harness)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        return done, None
    with open(tmp_path / "plan") as plan:
        rows = [line.split() for line in plan]
    # Without the tier column; the harness's runner skips comments.
    return done, [" ".join(row[1:]) for row in rows if row and row[0][0] != "#"]


def link(tmp_path):
    """Where the script links our harness row into the harness."""
    return tmp_path / "bench" / "peers" / "keras_transformer_peer.py"


def test_rows_run_grouped_by_workload_ours_last(tmp_path):
    done, rows = run_peers(tmp_path)
    assert done.returncode == 0, done.stderr
    # The peers' rows of each workload, then ours, in the plans' order.
    assert rows[:4] == [
        "torch peak_flops.py - peak",
        "torch a_peer.py small train",
        "mg b_peer.py small train",
        "ours keras_transformer_peer.py small train",
    ]
    groups = [tuple(row.split()[2:4]) for row in rows]
    assert groups == sorted(groups, key=groups.index)  # each group contiguous
    assert groups.count(("small", "decode")) > 1
    assert (
        rows[groups.index(("small", "decode"))]
        == "torch a_peer.py small decode"
    )
    assert (
        rows[groups.index(("base", "train"))] == "mg b_peer.py base train --xla"
    )
    # The decoding row the targets compare comes first among ours.
    assert rows[groups.index(("small", "decode")) + 1] == (
        "ours keras_transformer_peer.py small "
        "decode --saved_model --intra_op_threads=1"
    )
    with open(SCRIPT.replace("run_peers.sh", "peer_plan.txt")) as ours:
        expected = [line for line in ours if line.strip() and line[0] != "#"]
    assert len(rows) == 5 + len(expected)  # nothing lost, nothing doubled
    # Our row was linked into the harness for the run, and is gone after it;
    # the results went to our folder.
    with open(tmp_path / "plan.link") as linked:
        assert linked.read().strip() == SCRIPT.replace(
            "run_peers.sh", "peer_row.py"
        )
    assert not os.path.lexists(link(tmp_path))
    with open(tmp_path / "plan.out") as out:
        assert os.path.dirname(out.read().strip()) == os.path.join(
            os.path.dirname(SCRIPT), "results"
        )


def test_plan_order_appends_ours(tmp_path):
    done, rows = run_peers(tmp_path, order="plan")
    assert done.returncode == 0, done.stderr
    assert rows[:5] == [
        " ".join(line.split()[1:])
        for line in HARNESS_PLAN.splitlines()
        if line[0] != "#"
    ]
    assert all(row.startswith("ours ") for row in rows[5:])


def test_rounds_repeat_each_group_in_a_row(tmp_path):
    _, once = run_peers(tmp_path / "once")
    done, rows = run_peers(tmp_path / "thrice", rounds="3")
    assert done.returncode == 0, done.stderr
    groups = [tuple(row.split()[2:4]) for row in once]
    expected = []
    for group in sorted(set(groups), key=groups.index):
        expected += 3 * [row for row, g in zip(once, groups) if g == group]
    assert rows == expected


def test_rounds_repeat_the_whole_plan_in_plan_order(tmp_path):
    _, once = run_peers(tmp_path / "once", order="plan")
    done, rows = run_peers(tmp_path / "twice", order="plan", rounds="2")
    assert done.returncode == 0, done.stderr
    assert rows == once + once


@pytest.mark.parametrize("rounds", ["0", "two", "-1", "1.5"])
def test_rounds_that_are_not_a_count_are_refused(tmp_path, rounds):
    done, _ = run_peers(tmp_path, rounds=rounds)
    assert done.returncode == 2
    assert (
        f"ROUNDS must be a positive whole number of rounds, not '{rounds}'"
        in (done.stderr)
    )
    assert not os.path.lexists(link(tmp_path))


def test_unknown_order_is_refused(tmp_path):
    done, _ = run_peers(tmp_path, order="random")
    assert done.returncode == 2
    assert "ORDER must be grouped or plan, not 'random'" in done.stderr
    assert not os.path.lexists(link(tmp_path))  # the harness is left alone


def test_our_environment_without_the_package_is_refused(tmp_path):
    done, _ = run_peers(tmp_path, installed=False)
    assert done.returncode == 1
    assert "keras_transformer is not installed in" in done.stderr
    assert "run benchmarks/setup_venv.sh" in done.stderr
    assert not os.path.lexists(link(tmp_path))
