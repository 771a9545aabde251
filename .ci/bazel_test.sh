#!/usr/bin/env bash
# CI's Bazel step (after the pytest suite): builds every target and runs the
# test targets, offline, with Debian's Bazel 4.2.3 and the Python of the
# environment pytest used. The "slow" test targets are skipped: pytest has
# just run them. Usage: [PYTHON=/path/to/python] .ci/bazel_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# 1. Bazel (~40 MB of Debian packages, ~30 s): bazel-bootstrap is Bazel,
# bazel-rules-java the local @rules_java of --config=offline.
if ! command -v bazel >/dev/null || [ ! -d /usr/share/bazel/rules/java ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  echo "+ apt-get install bazel-bootstrap bazel-rules-java"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    bazel-bootstrap bazel-rules-java >/dev/null
fi

# 2. This machine's paths for --config=offline (.configure.bazelrc).
"${PYTHON:-python3}" tools/configure_bazel.py

# 3. Build every target, then test a sample of the test targets in Bazel's
# sandbox, two at a time (two cores): one file per test package. pytest has
# just run every test, and //tests:test_bazel_targets (in the sample) checks
# that each target lists the targets of the modules its sources import, so
# the sample shows the test rule, the runfiles and the deps at work without
# running each file twice (all of them took ~4 min more on a 2-core AVX2 VM).
# BAZEL_TESTS=all tests every target but the "slow" ones.
targets=(
  //tests:test_bazel_targets
  //tests:test_config
  //tests/layers:test_attention
  //tests/training:test_losses
  //tests/data:test_text_files
  //tests/decoding:test_greedy
)
if [ "${BAZEL_TESTS:-sample}" = all ]; then targets=(//...); fi
log=$(mktemp)
trap 'rm -f "$log"; bazel shutdown >/dev/null 2>&1 || true' EXIT
flags=(--config=offline --jobs=2 --color=no --curses=no)
echo "+ bazel build //..."
bazel build //... "${flags[@]}"
echo "+ bazel test ${targets[*]} --test_tag_filters=-slow"
status=0
bazel test "${targets[@]}" "${flags[@]}" --test_tag_filters=-slow \
  --local_test_jobs=2 2>&1 | tee "$log" || status=$?

# One closing line with the counts of test targets.
passed=$(grep -cE '^//[^ ]+ +((\(cached\) )?PASSED|FLAKY)' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' \
  "$log" || true)
echo "bazel: ${passed} passed, ${failed} failed"
exit "$status"
