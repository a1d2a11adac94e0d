#!/usr/bin/env bash
# Installs what the tests need (scripts/setup.sh), then runs the whole test suite against the real
# SQLCipher library, then the concurrency and transaction tests again under ThreadSanitizer.
# Extra arguments go to the main `swift test` run (e.g. --filter KillTests); with arguments the
# ThreadSanitizer run is skipped.
# Stress: REKEY_KILL_TRIALS=250 MIGRATION_KILL_TRIALS=250 scripts/test.sh --filter Kill
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build --build-tests
swift test "$@"
if [ $# -eq 0 ]; then
  echo "== ThreadSanitizer: concurrency and transaction tests"
  swift test --sanitize=thread --scratch-path .build-tsan --filter "ConcurrencyTests|TransactionTests"
fi
