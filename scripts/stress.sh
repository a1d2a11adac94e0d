#!/usr/bin/env bash
# Crash stress: runs every crash path many times against the real library and prints one table.
#   scripts/stress.sh                 40 kills per rotation path, 80 power cuts per path, … (720 trials)
#   TRIALS=100 scripts/stress.sh      more of everything (kill paths get TRIALS, power-cut paths 2×)
# Paths: kill -9 of the rekey CLI (page re-encryption and engine rekey, rollback and WAL files;
# export of a plaintext file and to new cipher settings), of a process migrating, of rekey while
# another process commits rows; rotation while services run and processes start up at the same
# instant (LiveRotationTests: TRIALS start-up rounds, TRIALS/4 rotations, 3 services); simulated power cuts at every durable step of the page
# re-encryption, the export swap and database creation; power cuts and kill -9 during a master-key
# rewrap and a rotation to a wrapped data key (KeyEncryptionCrashTests, 2×TRIALS); kill -9 of a service
# rotating its file in the background while it writes (BackgroundRotationKillTests, 2×TRIALS per mode). Seeds are printed; REKEY_KILL_SEED and
# POWER_CUT_SEED replay a run. Exit status 1 when any trial lost data or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || exit 1
swift build --build-tests || exit 1

per=${TRIALS:-40}
export REKEY_KILL_TRIALS=$per MIGRATION_KILL_TRIALS=$per WRITER_KILL_TRIALS=$(( (per + 1) / 2 )) POWER_CUT_TRIALS=$(( per * 2 ))
export LIVE_STARTUP_ROUNDS=$per LIVE_ROTATIONS=$(( (per + 3) / 4 )) LIVE_SERVICES=3 KEK_CRASH_TRIALS=$(( per * 2 ))
export BACKGROUND_KILL_TRIALS=$(( per * 2 ))
log=.build/stress.log
start=$(date +%s)
swift test --filter "KillTests|WriterKillTests|MigrationKillTests|PowerCutTests|LiveRotationTests|KeyEncryptionCrashTests|BackgroundRotationKillTests" > "$log" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))

grep -h "seed" "$log" | grep -E "^(kill|power)" | sed 's/^/  /' || true
echo
awk -F'|' '
  /^crash-table\|/ {
    rows[++n] = $2; trials[n] = $3; old[n] = $4; new[n] = $5; bad[n] = $6; diff[n] = $7
    if (length($2) > width) width = length($2)
  }
  END {
    if (n == 0) { print "no crash-table rows found: see the test log"; exit 1 }
    fmt = "%-" width "s  %7s  %10s  %10s  %10s  %10s\n"
    printf fmt, "path", "trials", "old key", "new key", "unopenable", "mismatches"
    for (i = 1; i <= n; i++) {
      printf fmt, rows[i], trials[i], old[i], new[i], bad[i], diff[i]
      t += trials[i]; o += old[i]; w += new[i]; u += bad[i]; m += diff[i]
    }
    printf fmt, "total", t, o, w, u, m
    if (u + m > 0) exit 1
  }' "$log"
table=$?
echo
echo "rotation while other processes use the database:"
grep -h "^live-table|" "$log" | cut -d'|' -f2- | sed 's/|/  /g; s/^/  /' || true
echo
echo "stress run: ${elapsed} s; full log in $log"
if [ $status -ne 0 ] || [ $table -ne 0 ]; then
  echo "FAILED: see $log" >&2
  exit 1
fi
