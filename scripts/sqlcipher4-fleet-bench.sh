#!/usr/bin/env bash
# Runs the fleet benchmark (scripts/fleet-bench.sh, Benchmarks/README.md) against SQLCipher 4: in the
# Debian trixie root that scripts/sqlcipher4-check.sh uses (set up by scripts/sqlcipher4-root.sh),
# on this repository's HEAD. Needs root. Arguments go to the benchmark; results go to
# .build/benchmarks/fleet-results-sqlcipher4.json here.
#   scripts/sqlcipher4-fleet-bench.sh --only open --passphrase-opens 200
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/sqlcipher4-root.sh
echo "== the release fleet benchmark against that engine"
sqlcipher4_run "swift build -c release --product encryptedsqlite-fleet-benchmarks && swift run -c release --skip-build encryptedsqlite-fleet-benchmarks --json .build/benchmarks/fleet-results.json $*"
mkdir -p .build/benchmarks
cp "$clone/.build/benchmarks/fleet-results.json" .build/benchmarks/fleet-results-sqlcipher4.json
