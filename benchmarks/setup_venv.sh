#!/usr/bin/env bash
# Creates the venv of our harness rows, as the harness's setup_venvs.sh does
# the peers': ${VENV_ROOT:-/tmp}/bvenv-ours, with this checkout installed
# editable and nothing else (no test or plot extras: an installed matplotlib,
# or IPython, is imported by every `import tensorflow` and would add ~47 MiB
# to our rows' peak memory). benchmarks/run_peers.sh uses it by default.
#
#   benchmarks/setup_venv.sh          (PYTHON=python3.11 by default)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${VENV_ROOT:-/tmp}/bvenv-ours
if [ -x "$dir/bin/python" ]; then
  echo "exists: $dir"
  exit 0
fi
"${PYTHON:-python3.11}" -m venv "$dir"
"$dir/bin/pip" install -q -e "$here/.."
echo "created: $dir"
