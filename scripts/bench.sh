#!/usr/bin/env bash
# Runs the benchmark suite of issue 6 in release mode: EncryptedSQLite next to the raw SQLCipher C
# API (same engine, key, cipher settings and SQL) in one process run; prints a table and writes
# .build/benchmarks/results.json (medians and ratios). Takes several minutes (the 256 MB rotation).
# Extra arguments go to the benchmark, e.g.:
#   scripts/bench.sh --runs 5 --rotation-mb 64 --rotation-runs 1
#   scripts/bench.sh --only insert,fetch,lookup
#   scripts/bench.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build -c release --product encryptedsqlite-benchmarks
swift run -c release --skip-build encryptedsqlite-benchmarks "$@"
