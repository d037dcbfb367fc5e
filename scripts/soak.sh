#!/usr/bin/env bash
# Runs the tests that have been flaky before (Slurm, isolation, resume) again and again, optionally beside
# CPU burners, to find what fails by chance. A flaky test is a bug: this finds it, it does not hide it.
#   scripts/soak.sh [ROUNDS] [BURNERS] [PYTEST ARGS...]   (make soak SOAK_ROUNDS=20 SOAK_BURNERS=3)
# Every round is a fresh pytest session; the log of each failed round is kept in reports/soak/.
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
burners=${2:-0}
shift 2 2>/dev/null || shift $#
[ $# -gt 0 ] || set -- tests/test_slurm.py tests/test_isolation.py tests/test_resume.py -n 2 --dist worksteal
PY=${PY:-.venv/bin/python}
logs=${SOAK_LOGS:-reports/soak}
mkdir -p "$logs"
pids=()
for _ in $(seq "$burners"); do (while :; do :; done) & pids+=($!); done
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
green=0
start=$SECONDS
for round in $(seq "$rounds"); do
  log=$logs/round-$round.log
  t0=$SECONDS
  "$PY" -m pytest -p no:cacheprovider "$@" >"$log" 2>&1
  status=$?
  summary=$(grep -aE '^=* ?[0-9]+ (passed|failed|error)' "$log" | tail -1)
  if [ "$status" = 0 ]; then
    green=$((green + 1)); verdict=green; rm -f "$log"
  else
    verdict="FAILED (log: $log)"
  fi
  # the load the round ran under, so that a slow or failed round can be set beside it
  load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
  echo "soak: round $round/$rounds $verdict in $((SECONDS - t0)) s (load ${load:-unknown}): $summary"
done
echo "soak: $green of $rounds rounds green, $burners CPU burner(s), $((SECONDS - start)) s"
[ "$green" = "$rounds" ]
