#!/usr/bin/env bash
# Installs what the tests need (scripts/setup.sh), then runs the whole test suite against the real
# SQLCipher library. Extra arguments go to `swift test` (e.g. --filter KillTests).
# Stress: REKEY_KILL_TRIALS=200 scripts/test.sh --filter KillTests
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build --build-tests
swift test "$@"
