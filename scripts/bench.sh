#!/usr/bin/env bash
# Runs the benchmark suite of issue 6 in release mode: EncryptedSQLite next to the raw SQLCipher C
# API (same engine, key, cipher settings and SQL) in one process run; prints a table and writes
# .build/benchmarks/results.json (medians and ratios). Takes several minutes (the 256 MB rotation).
# Extra arguments go to the benchmark, e.g.:
#   scripts/bench.sh --runs 5 --rotation-mb 64 --rotation-runs 1
#   scripts/bench.sh --only insert,fetch,lookup
#   scripts/bench.sh --help
# --grdb-peer (or GRDB_PEER=1) also builds and runs Benchmarks/GRDBPeer afterwards: GRDB 7.10 and
# raw C on the system libsqlite3, a package of its own (its first release build takes ~3 min).
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${GRDB_PEER:-0}
arguments=()
for argument in "$@"; do
    if [ "$argument" = "--grdb-peer" ]; then peer=1; else arguments+=("$argument"); fi
done
scripts/setup.sh
swift build -c release --product encryptedsqlite-benchmarks
swift run -c release --skip-build encryptedsqlite-benchmarks ${arguments[@]+"${arguments[@]}"}
if [ "$peer" = 1 ]; then
    echo "== GRDB 7.10 peer (Benchmarks/GRDBPeer, system libsqlite3)"
    (cd Benchmarks/GRDBPeer && swift build -c release && swift run -c release --skip-build grdb-peer)
fi
