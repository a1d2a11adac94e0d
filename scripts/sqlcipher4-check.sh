#!/usr/bin/env bash
# Runs the README's test command (scripts/test.sh) on a fresh Debian 13 (trixie, SQLCipher 4.6.1): in
# the root scripts/sqlcipher4-root.sh makes, where scripts/test.sh sees an engine of its own and runs
# the suite once on it, under the caller's umask (TEST_UMASK empty; the host's run has umask 077).
# scripts/test.sh runs this after the suite on a Debian 12 machine.
#   scripts/sqlcipher4-check.sh                  every test and the demo (ThreadSanitizer only with TSAN=1)
#   scripts/sqlcipher4-check.sh --filter Rotation
#   scripts/sqlcipher4-check.sh --prepare        only make the root and install its packages
#   LOADTEST_SQLCIPHER4=1 scripts/sqlcipher4-check.sh   also the example HTTP service's load test (scripts/load-test.sh --ci)
# Needs root (sudo scripts/sqlcipher4-check.sh otherwise). ENCRYPTEDSQLITE_EXCHANGE_IN (a folder
# another engine's run wrote, see Tests/README.md) is copied in; the files this run writes for the
# other engine come back to .build/engine-exchange/from-sqlcipher4.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/sqlcipher4-root.sh
[ "${1:-}" = "--prepare" ] && exit 0

rm -rf "$clone/.build/engine-exchange"
exchange=""
if [ -n "${ENCRYPTEDSQLITE_EXCHANGE_IN:-}" ]; then
  mkdir -p "$clone/.build/engine-exchange"
  # Missing when the other run wrote nothing: CrossEngineTests then fails and says so.
  [ -d "$ENCRYPTEDSQLITE_EXCHANGE_IN" ] && cp -a "$ENCRYPTEDSQLITE_EXCHANGE_IN" "$clone/.build/engine-exchange/in"
  exchange="ENCRYPTEDSQLITE_EXCHANGE_IN=/root/encryptedsqlite/.build/engine-exchange/in"
fi
arguments=""
[ $# -gt 0 ] && arguments=$(printf '%q ' "$@")
status=0
# The example HTTP service's load test runs on the host's engine only unless LOADTEST_SQLCIPHER4=1: its first
# build (Hummingbird, SwiftNIO) would add minutes inside the root too (Examples/NotesServer/README.md).
sqlcipher4_run "env $exchange TSAN=${TSAN:-0} FLUENT=${FLUENT:-1} LOADTEST=${LOADTEST_SQLCIPHER4:-0} TEST_UMASK= scripts/test.sh $arguments" || status=$?
if [ -d "$clone/.build/engine-exchange/out" ]; then
  rm -rf "$repo/.build/engine-exchange/from-sqlcipher4" && mkdir -p "$repo/.build/engine-exchange"
  cp -a "$clone/.build/engine-exchange/out" "$repo/.build/engine-exchange/from-sqlcipher4"
fi
exit $status
