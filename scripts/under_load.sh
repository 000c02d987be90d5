#!/usr/bin/env bash
# The timing-sensitive tests (marker `timing`: deadlines that fail open, the loop never held)
# run with two CPU-bound processes per core beside them, as on a busy machine. They measure
# against clocks the load cannot move (tests/support/timing.py), so they must pass here too.
#
#   scripts/under_load.sh [RUNS] [PYTEST ARGS...]   RUNS in a row (default 1), all must pass
#
# Uses .venv/bin/python (the README's test command makes it), or $PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
runs="${1:-1}"
shift || true

burners=()
stop_burners() { ((${#burners[@]})) && kill "${burners[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap stop_burners EXIT
for _ in $(seq $((2 * $(nproc)))); do
    "$python" -c 'while True: pass' &
    burners+=($!)
done
echo "under_load: ${#burners[@]} CPU-bound processes on $(nproc) cores; $runs run(s) of -m timing"

for run in $(seq "$runs"); do
    echo "under_load: run $run of $runs"
    "$python" -m pytest -q -p no:cacheprovider -m timing "$@"
done
