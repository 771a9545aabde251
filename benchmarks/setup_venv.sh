#!/usr/bin/env bash
# Creates the venv of our harness rows, as the harness's setup_venvs.sh does
# the peers': ${VENV_ROOT:-/tmp}/bvenv-ours, with this checkout installed
# editable and nothing else (no test or plot extras: an installed matplotlib,
# or IPython, is imported by every `import tensorflow` and would add ~47 MiB
# to our rows' peak memory). benchmarks/run_peers.sh uses it by default.
# A venv whose install failed, or that lacks a requirement setup.py added
# since, is installed into again.
#
#   benchmarks/setup_venv.sh          (PYTHON=python3.11 by default)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${VENV_ROOT:-/tmp}/bvenv-ours
if [ ! -x "$dir/bin/python" ]; then
  "${PYTHON:-python3.11}" -m venv "$dir"
fi
"$dir/bin/pip" install -q -e "$here/.."
if ! out=$("$dir/bin/python" -c 'import keras_transformer' 2>&1); then
  echo "$out" >&2
  echo "keras_transformer does not import in $dir (above)" >&2
  exit 1
fi
echo "ready: $dir"
