#!/usr/bin/env bash
# Issue 33's cost through Fluent (Benchmarks/FluentCost, release builds): the same Fluent workload
# (10,000 todos inserted in batches of 100, 20 filtered fetches, 5 eager loads of 100 projects with
# their todos) on fluent-sqlite-driver over plain SQLite and on this repository's driver over
# SQLCipher (raw key, WAL on both sides). Runs alternate between the two executables; each process
# runs the workload twice and only its second run counts (the first warms it up). Prints the
# medians, their ratio, and, with perf installed, where each side's processor time goes, by layer.
#   scripts/fluent-cost.sh              5 rounds
#   ROUNDS=9 scripts/fluent-cost.sh
# The first release build (fluent-kit, sqlite-nio's SQLite, the driver) takes several minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
rounds=${ROUNDS:-5}
package=Benchmarks/FluentCost
swift build -c release --package-path "$package"
bin=$(swift build -c release --package-path "$package" --show-bin-path)
out=.build/fluent-cost
rm -rf "$out" && mkdir -p "$out"
engine=$(dpkg-query -W -f='${Version}' libsqlcipher-dev)
echo "== $rounds rounds, SQLCipher $engine; each round: fluent-cost-plain, then fluent-cost-encrypted (the order flips every round)"
for round in $(seq 1 "$rounds"); do
  order=(fluent-cost-plain fluent-cost-encrypted)
  [ $((round % 2)) = 0 ] && order=(fluent-cost-encrypted fluent-cost-plain)
  for executable in "${order[@]}"; do
    "$bin/$executable" --runs 2 --folder "$out/files" | tail -n 1 >> "$out/runs.jsonl"
  done
done
python3 - "$out/runs.jsonl" "$engine" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
phases = ["insert", "fetch", "eager"]
names = {"insert": "insert 10,000 (batches of 100)", "fetch": "20 filtered fetches", "eager": "5 eager loads (100 + 10,000)"}
for run in runs:
    run["total"] = sum(run[p] for p in phases)
median = {d: {p: statistics.median(r[p] for r in runs if r["driver"] == d) for p in phases + ["total"]}
          for d in ("fluent-sqlite-driver", "encrypted-sqlite")}
print(f"\n| phase | fluent-sqlite-driver, plain SQLite (ms) | this driver, SQLCipher {sys.argv[2]} (ms) | ratio |")
print("|---|---:|---:|---:|")
for p in phases + ["total"]:
    a, b = median["fluent-sqlite-driver"][p], median["encrypted-sqlite"][p]
    print(f"| {names.get(p, 'total')} | {a:.1f} | {b:.1f} | {b / a:.2f} |")
PY
if command -v perf >/dev/null && perf record -q -o /dev/null true 2>/dev/null; then
  echo
  echo "== where the processor time goes (perf, one process of 2 runs each, samples by layer; runtime and libc time counted to the layer that called it)"
  for executable in fluent-cost-plain fluent-cost-encrypted; do
    perf record -q -g -F 1999 -o "$out/$executable.perf" "$bin/$executable" --runs 2 --folder "$out/files" > /dev/null 2>&1
    perf script -i "$out/$executable.perf" -F ip,sym,dso 2>/dev/null | python3 scripts/perf-layers.py "$executable"
  done
else
  echo "(perf is not usable here: no breakdown by layer)"
fi
