#!/usr/bin/env bash
# bench/startup.sh — start-up bar of issue 7: `lutra -e 'require "lutra"'` in <= 30 ms (median of 50 runs).
#   bench/startup.sh [RUNS]          (default 50)
# The binary is $LUTRA_BIN, else $LUTRA_BUILD_DIR (default build)/bin/release/cli/lutra. For scale it also
# times `luajit -e ''` and `lutra -e ''` (the interpreter and the binary without lutra), and prints the
# load average: on a loaded machine the numbers are the scheduler's as much as lutra's.
# Prints "RESULT require_median_ms=... require_p90_ms=..." and "BAR start-up <= 30 ms: PASS|FAIL".
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${LUTRA_BIN:-$ROOT/${LUTRA_BUILD_DIR:-build}/bin/release/cli/lutra}"
RUNS="${1:-50}"
[ -x "$BIN" ] || { echo "startup.sh: no lutra binary at $BIN (build it: ./lutra --build-only)" >&2; exit 1; }
cd "$ROOT"

# times RUNS runs of a command; prints the sorted milliseconds, one per line
times_ms() {
  local i t0 t1
  for ((i = 0; i < RUNS; i++)); do
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 </dev/null || { echo "startup.sh: failed: $*" >&2; exit 1; }
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 ))
  done | sort -n | awk '{ printf "%.3f\n", $1 / 1000 }'
}

# median, p90, min of a sorted list of numbers on stdin
stats() { awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
  p = v[int(0.9 * NR + 0.999)]; printf "%.2f %.2f %.2f\n", m, p, v[1] }'; }

echo "startup: $RUNS runs each; $(uptime | sed 's/.*load average/load average/')"
"$BIN" -e 'require "lutra"' || { echo "startup.sh: require \"lutra\" fails" >&2; exit 1; }
read -r lj_med lj_p90 lj_min < <(times_ms luajit -e '' | stats)
read -r bare_med bare_p90 bare_min < <(times_ms "$BIN" -e '' | stats)
read -r req_med req_p90 req_min < <(times_ms "$BIN" -e 'require "lutra"' | stats)
read -r lt_med lt_p90 lt_min < <(times_ms "$BIN" -e 'local lt = require "lutra"; local x = lt.ones(2, 2):sum():item()' | stats)
printf "  %-44s median %6.2f ms  p90 %6.2f ms  min %6.2f ms\n" "luajit -e ''" "$lj_med" "$lj_p90" "$lj_min"
printf "  %-44s median %6.2f ms  p90 %6.2f ms  min %6.2f ms\n" "lutra -e ''" "$bare_med" "$bare_p90" "$bare_min"
printf "  %-44s median %6.2f ms  p90 %6.2f ms  min %6.2f ms\n" "lutra -e 'require \"lutra\"'" "$req_med" "$req_p90" "$req_min"
printf "  %-44s median %6.2f ms  p90 %6.2f ms  min %6.2f ms\n" "lutra -e (require + a first tensor op)" "$lt_med" "$lt_p90" "$lt_min"
echo "RESULT require_median_ms=$req_med require_p90_ms=$req_p90 require_min_ms=$req_min bare_median_ms=$bare_med luajit_median_ms=$lj_med"
if awk -v m="$req_med" 'BEGIN { exit !(m <= 30) }'; then verdict=PASS; else verdict=FAIL; fi
echo "BAR start-up <= 30 ms (median): $verdict ($req_med ms)"
