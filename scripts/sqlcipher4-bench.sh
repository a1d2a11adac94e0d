#!/usr/bin/env bash
# Runs the release benchmark (scripts/bench.sh, Benchmarks/README.md) against SQLCipher 4: in the
# Debian trixie root that scripts/sqlcipher4-check.sh uses (set up by scripts/sqlcipher4-root.sh),
# on this repository's HEAD. Needs root. Arguments go to the benchmark; results go to
# .build/benchmarks/results-sqlcipher4.json here.
#   scripts/sqlcipher4-bench.sh --only rotation --rotation-page-size 4096
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/sqlcipher4-root.sh
echo "== the release benchmark against that engine"
sqlcipher4_run "swift build -c release --product encryptedsqlite-benchmarks && swift run -c release --skip-build encryptedsqlite-benchmarks --json .build/benchmarks/results.json $*"
mkdir -p .build/benchmarks
cp "$clone/.build/benchmarks/results.json" .build/benchmarks/results-sqlcipher4.json
