#!/usr/bin/env bash
# Runs the peer harness with keras_transformer as extra rows, in one run.
#
#   benchmarks/run_peers.sh [HARNESS_DIR]     (default: ../shared/bench)
#
# Links benchmarks/peer_row.py into the harness as
# peers/keras_transformer_peer.py for the run (the link is removed when it
# ends), adds the rows of benchmarks/peer_plan.txt to the harness's plan (in
# the ORDER below) and runs it; the harness's knobs (ONLY, FULL,
# ROW_TIMEOUT, BENCH_OUT, VENV_<name>) pass through. The results go to
# benchmarks/results/peers-<date>.jsonl unless BENCH_OUT names a file.
# Our rows use the venv of benchmarks/setup_venv.sh
# (${VENV_ROOT:-/tmp}/bvenv-ours: the package alone, as each peer has its
# own) unless VENV_ours names another. The peers' venvs come from the
# harness's setup_venvs.sh.
#
# ORDER=grouped (the default) runs the rows workload by workload (every
# "small train" row, then every "base train" row, ...; within a group the
# plan's order, ours last), so that the rows a ratio compares run minutes
# apart, not up to 20: this VM's speed drifts within a run, and with the
# plan's order (ORDER=plan) our rows all ran at its end.
#
# ROUNDS=N (default 1) runs each group's rows N times in a row (with
# ORDER=plan, the whole plan N times): one run then holds N pairs of every
# ratio, each pair minutes apart at most; benchmarks/peer_ratios.py pairs
# the rows round by round.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
harness=$(cd "${1:-$here/../../shared/bench}" && pwd)

rounds=${ROUNDS:-1}
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "ROUNDS must be a positive whole number of rounds, not '$rounds'" >&2
  exit 2
fi
plan=$(mktemp)
link=$harness/peers/keras_transformer_peer.py
# The harness is left as it was: the link to our row goes with the run.
trap 'rm -f "$plan" "$link"' EXIT
case ${ORDER:-grouped} in
  plan)
    for ((round = 0; round < rounds; round++)); do
      cat "$harness/plan.txt" "$here/peer_plan.txt"
    done > "$plan" ;;
  grouped)
    # Stable: groups by (config, workload) in order of first appearance.
    cat "$harness/plan.txt" "$here/peer_plan.txt" | awk -v rounds="$rounds" '
      /^[[:space:]]*(#|$)/ { next }
      { key = $4 " " $5; if (!(key in rows)) order[++groups] = key
        rows[key] = rows[key] $0 "\n" }
      END { for (i = 1; i <= groups; i++)
              for (round = 0; round < rounds; round++) printf "%s", rows[order[i]] }' > "$plan" ;;
  *) echo "ORDER must be grouped or plan, not '$ORDER'" >&2; exit 2 ;;
esac
export VENV_ours=${VENV_ours:-${VENV_ROOT:-/tmp}/bvenv-ours}
"$VENV_ours/bin/python" -c 'import keras_transformer' || {
  echo "keras_transformer is not installed in $VENV_ours:" \
    "run benchmarks/setup_venv.sh (or set VENV_ours to a venv with it)" >&2
  exit 1
}
ln -sf "$here/peer_row.py" "$link"
# Our results folder, not the harness's, unless BENCH_OUT says otherwise.
export BENCH_OUT=${BENCH_OUT:-$here/results/peers-$(date +%Y%m%d-%H%M%S).jsonl}
PLAN=$plan bash "$harness/run_peers.sh"
