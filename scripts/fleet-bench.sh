#!/usr/bin/env bash
# Runs the fleet benchmark of issue 22 in release mode on this machine's engine: a master-key
# rotation of 10,000 wrapped data keys against re-encrypting the fleet, 1,000 opens with wrapped
# data keys against passphrases, unwraps through a SoftHSM2 token (Benchmarks/README.md). Prints a
# table with each goal and whether it is met and writes .build/benchmarks/fleet-results.json.
# Extra arguments go to the benchmark, e.g.:
#   scripts/fleet-bench.sh --databases 2000 --reencrypt 500 --opens 200
#   scripts/fleet-bench.sh --only open --passphrase-opens 100
#   scripts/fleet-bench.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build -c release --product encryptedsqlite-fleet-benchmarks
swift run -c release --skip-build encryptedsqlite-fleet-benchmarks "$@"
