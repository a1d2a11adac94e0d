#!/usr/bin/env bash
# The README's test command, and all that CI (.ci/run) runs. Installs what the tests need
# (scripts/setup.sh), then runs every test against the real SQLCipher library on this machine's engine
# under umask 077 (no test may depend on the caller's umask; the SQLCipher 4 run below keeps the
# caller's umask, so both are covered), the README's demo (scripts/demo.sh), the concurrency and
# transaction tests again under ThreadSanitizer, and:
#   on Debian 12 (SQLCipher 3.4.1): every test again against SQLCipher 4.6.1 in a Debian 13 root
#     (scripts/sqlcipher4-check.sh, needs root or sudo; made while the first run goes), then each
#     engine opens the files the other wrote (CrossEngineTests);
#   on Debian 13 (SQLCipher 4.x): the suite runs once, on that engine.
# A failure on either engine fails the command. Extra arguments go to `swift test` on this machine's
# engine only, with no ThreadSanitizer run (e.g. scripts/test.sh --filter KillTests).
#   TSAN=0            no ThreadSanitizer run
#   LOADTEST=0        no load test of the example HTTP service (scripts/load-test.sh --ci, with its fuzz), nor
#                     its own tests (swift test --package-path Examples/NotesServer); the SQLCipher 4
#                     run skips it unless LOADTEST_SQLCIPHER4=1 (scripts/sqlcipher4-check.sh)
#   FLUENT=0          no Fluent driver phases (Integrations/FluentEncryptedSQLite, its own package: FluentKit,
#                     SQLKit, SwiftNIO; a first build takes minutes): FluentBenchmarker and SQLKitBenchmark
#                     against the driver on this machine's engine, and in the SQLCipher 4 run on 4.6.1
#   TEST_UMASK=…      the umask of the "every test" phase (default 077; empty: the caller's umask,
#                     as scripts/sqlcipher4-check.sh sets for the SQLCipher 4 run)
#   SQLCIPHER4=0      on Debian 12, no SQLCipher 4 run (it then says that SQLCipher 4 was not tested)
#   SQLCIPHER4_ROOT   where the Debian 13 root goes (default .build-sqlcipher4/root)
#   SUITE_TIME_LIMIT  seconds the "every test" phase may take (default 1500; a loaded 2-core run takes
#                     10-12 minutes): then every process of it gets SIGQUIT (the Swift runtime prints
#                     their backtraces) and the phase fails, naming the tests that never ended
# Stress: REKEY_KILL_TRIALS=250 MIGRATION_KILL_TRIALS=250 scripts/test.sh --filter Kill
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
engine=$(dpkg-query -W -f='${Version}' libsqlcipher-dev)   # 3.4.1-2+b1 on Debian 12, 4.6.1-… on Debian 13
major=${engine%%.*}

if [ $# -gt 0 ]; then
  echo "== SQLCipher $engine: swift test $*"
  swift build --build-tests
  exec swift test "$@"
fi

failed=()
failed_logs=()
phases=0
phase() {  # phase <name> <command…>: runs it, times it, keeps its output, remembers a failure
  local name=$1 start=$SECONDS log
  shift
  phases=$(( phases + 1 ))
  mkdir -p .build
  log=".build/test-phase-$phases.log"
  echo "== $name"
  if ! "$@" 2>&1 | tee "$log"; then
    failed+=("$name")
    failed_logs+=("$log")
  fi
  timings+=("$(printf '%-44s %5d s' "$name" $(( SECONDS - start )))")
}
timings=()
summary() {
  echo "== times"
  printf '  %s\n' "${timings[@]}"
  if [ ${#failed[@]} -gt 0 ]; then
    # What failed, last, where a reader of the output's tail sees it (the whole output is in the logs).
    for index in "${!failed[@]}"; do
      echo "== what failed in: ${failed[$index]} (whole output: ${failed_logs[$index]})" >&2
      failure_lines "${failed_logs[$index]}" >&2
      unfinished_tests "${failed_logs[$index]}" >&2
    done
    echo "FAILED: ${failed[*]}" >&2
    exit 1
  fi
}
failure_lines() {  # failure_lines <log>: each failure (30 at most), with the detail lines (↳) Swift Testing prints under an issue
  awk '
    /Test run started/ { started = 1 }
    /Test run with .* (passed|failed) after/ { summarized = 1 }
    /✘ Test .*(recorded an issue|failed after)|error: |Fatal error|Caught error/ {
      if (count++ < 30) print substr($0, 1, 400)
      detail = /recorded an issue/ && count <= 30
      next
    }
    detail && /^ *↳/ { print substr($0, 1, 2000); next }
    { detail = 0 }
    END { if (started && !summarized) print "   the test process ended without its summary: killed (SIGKILL leaves no message) or crashed; the tests still running are below" }
  ' "$1"
}
unfinished_tests() {  # unfinished_tests <log>: the tests the log shows started and never ended (a hang)
  awk '
    function name() { match($0, /Test "[^"]*"/); return substr($0, RSTART + 6, RLENGTH - 7) }
    /^◇ Test "/ && / started\.$/ { started[name()] = 1 }
    /^(✔|✘|━) Test "/ && /(passed|failed) after/ { ended[name()] = 1 }
    END { for (test in started) if (!(test in ended)) print "   never ended: " test }
  ' "$1"
}
# A hung test fails the phase with what was running instead of outlasting CI (SUITE_TIME_LIMIT above).
suite_time_limit=(timeout --signal=QUIT --kill-after=300 "${SUITE_TIME_LIMIT:-1500}")
host_suite() {
  phase "SQLCipher $engine: build" swift build --build-tests
  local test_umask=${TEST_UMASK-077}
  if [ -n "$test_umask" ]; then
    # Tests set the modes they rely on; a hardened umask (security-minded users, CI images) proves it.
    phase "SQLCipher $engine: every test (umask $test_umask)" bash -c 'umask "$1" && shift && exec "$@" swift test' umask "$test_umask" "${suite_time_limit[@]}"
  else
    phase "SQLCipher $engine: every test (umask $(umask))" "${suite_time_limit[@]}" swift test
  fi
  phase "SQLCipher $engine: the README's demo (scripts/demo.sh)" scripts/demo.sh
  if [ "${LOADTEST:-1}" != 0 ]; then
    # The example HTTP service (Examples/NotesServer, its own package: Hummingbird, SwiftNIO) under wrk
    # while rekey rotates its file 3 times, then killed with kill -9 during rotations 3 times: fails on
    # an HTTP error or an acknowledged write missing under the newest key, never on timings.
    phase "SQLCipher $engine: HTTP service under load and rotation (scripts/load-test.sh --ci)" scripts/load-test.sh --ci
    # Its own tests (issue 36: hostile clients, timeouts, a bounded shutdown), on the load test's debug
    # build folder: only the test target is compiled here.
    phase "SQLCipher $engine: HTTP service's own tests (Examples/NotesServer)" \
      "${suite_time_limit[@]}" swift test --package-path Examples/NotesServer
  fi
  if [ "${FLUENT:-1}" != 0 ]; then
    # The Fluent driver: every FluentBenchmarker test fluent-sqlite-driver 4.9.0 runs, SQLKitBenchmark's
    # suite and the driver's own tests, on real encrypted files; on SQLCipher 3.4.1 (SQLite 3.15.2) a
    # test is skipped only for a SQLite feature that engine lacks, named in the skip.
    phase "SQLCipher $engine: Fluent driver: build" swift build --build-tests --package-path Integrations/FluentEncryptedSQLite
    phase "SQLCipher $engine: Fluent driver: FluentBenchmarker and SQLKitBenchmark" \
      "${suite_time_limit[@]}" swift test --skip-build --package-path Integrations/FluentEncryptedSQLite
  fi
  if [ "${TSAN:-1}" != 0 ]; then
    # The suites whose code shares state between threads: the reader pool, transactions, the page
    # re-encryption's workers and write-behind syncs, following a rotation made elsewhere, group commit,
    # background rotation (its thread and the writer lock).
    phase "SQLCipher $engine: ThreadSanitizer (concurrency, transactions, page re-encryption workers, catch-up)" \
      swift test --sanitize=thread --scratch-path .build-tsan \
        --filter "EncryptedSQLiteTests\.(ConcurrencyTests|PageReencryptionTests|RotationElsewhereTests|ReaderPoolFormatTests|GroupCommitTests|BackgroundRotationTests|ServiceAPITests|WriterExecutorTests)|SQLCipherConnectionTests\.TransactionTests|DurableFilesTests\.WriteBehindFileTests"
  fi
}

if [ "$major" -ge 4 ]; then
  echo "== this machine's engine is SQLCipher $engine (Debian 13 or later): the suite runs once, on it"
  echo "   (SQLCipher 3.4.1 is Debian 12's engine; its run and the cross-engine tests happen on Debian 12)"
  host_suite
  summary
  exit 0
fi

if [ "${SQLCIPHER4:-1}" = 0 ]; then
  echo "== SQLCIPHER4=0: SQLCipher 4 is NOT tested in this run"
  host_suite
  summary
  exit 0
fi

# Debian 12: SQLCipher 3.4.1 here, then SQLCipher 4 in a Debian 13 root, which needs root.
as_root=(env)
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "test.sh: the SQLCipher 4 run makes a Debian 13 root (debootstrap) and tests in it (chroot, mount), which" >&2
    echo "needs root: run this as root, or install sudo; SQLCIPHER4=0 $0 tests this machine's engine only." >&2
    exit 1
  fi
  echo "== the SQLCipher 4 run needs root (debootstrap, chroot, mount): asking sudo now"
  sudo -v
  as_root=(sudo env "CI=${CI:-}" "TSAN=${TSAN:-}" "FLUENT=${FLUENT:-}" "SQLCIPHER4_INTEROP_OPTIONAL=${SQLCIPHER4_INTEROP_OPTIONAL:-}" "LOADTEST_SQLCIPHER4=${LOADTEST_SQLCIPHER4:-}")
  [ -n "${SQLCIPHER4_ROOT:-}" ] && as_root+=("SQLCIPHER4_ROOT=$SQLCIPHER4_ROOT")
fi

# The Debian 13 root is made (debootstrap, packages) while the SQLCipher 3.4.1 suite runs: that is
# mostly waiting for the network and the disk, the suite mostly for the processor.
mkdir -p .build
(
  start=$SECONDS
  status=0
  "${as_root[@]}" scripts/sqlcipher4-check.sh --prepare > .build/sqlcipher4-prepare.log 2>&1 || status=$?
  echo "$(( SECONDS - start ))" > .build/sqlcipher4-prepare.seconds
  exit $status
) &
prepare=$!

host_suite

echo "== waiting for the Debian 13 root"
if wait $prepare; then
  timings+=("$(printf '%-44s %5d s' "Debian 13 root (alongside the 3.4.1 run)" "$(cat .build/sqlcipher4-prepare.seconds)")")
  grep '^== ' .build/sqlcipher4-prepare.log | sed 's/^/   /'
  # Every test on SQLCipher 4; its CrossEngineTests open the files the 3.4.1 run wrote for it.
  phase "SQLCipher 4 (Debian 13 root): build and every test" \
    "${as_root[@]}" "ENCRYPTEDSQLITE_EXCHANGE_IN=$PWD/.build/engine-exchange/out" scripts/sqlcipher4-check.sh
  # And the files the SQLCipher 4 run wrote for this engine, opened here.
  phase "SQLCipher $engine: files SQLCipher 4 wrote (CrossEngineTests)" \
    env "ENCRYPTEDSQLITE_EXCHANGE_IN=$PWD/.build/engine-exchange/from-sqlcipher4" swift test --skip-build --filter 'EncryptedSQLiteTests\.CrossEngineTests'
else
  cat .build/sqlcipher4-prepare.log >&2
  failed+=("Debian 13 root")
fi
summary
