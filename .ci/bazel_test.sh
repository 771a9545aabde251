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

# 3. Build everything, run the tests that pytest does not already cover
# with their slow tier, two at a time (two cores).
log=$(mktemp)
trap 'rm -f "$log"; bazel shutdown >/dev/null 2>&1 || true' EXIT
echo "+ bazel test //... --config=offline --test_tag_filters=-slow"
status=0
bazel test //... --config=offline --test_tag_filters=-slow \
  --jobs=2 --local_test_jobs=2 --color=no --curses=no 2>&1 |
  tee "$log" || status=$?

# One closing line with the counts of test targets.
passed=$(grep -cE '^//[^ ]+ +((\(cached\) )?PASSED|FLAKY)' "$log" || true)
failed=$(grep -cE '^//[^ ]+ +.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' \
  "$log" || true)
echo "bazel: ${passed} passed, ${failed} failed"
exit "$status"
