#!/usr/bin/env bash
# Measures `rekey` on a database of about SIZE_MB megabytes (default 100), in DELETE and WAL
# journal modes, RUNS times each (default 3), with the release build. Prints the file size, the
# rekey and verification times from `rekey --json`, throughput and peak RSS (GNU time).
# Then, on the same file, the engine's own methods through the sqlcipher shell: `PRAGMA rekey`
# in place, and `sqlcipher_export` into a new file (no fsync, no verification, user_version lost).
#   Benchmarks/rotation-time.sh            SIZE_MB=300 RUNS=5 Benchmarks/rotation-time.sh
#   REKEY_ARGS="--strategy engineRekey --verify schema" Benchmarks/rotation-time.sh   (rekey's options)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
command -v /usr/bin/time >/dev/null || { sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo; $sudo apt-get install -y -qq time >/dev/null; }
swift build -c release --product rekey >/dev/null
rekey="$(swift build -c release --show-bin-path)/rekey"
size_mb=${SIZE_MB:-100}
runs=${RUNS:-3}
rows=$(( size_mb * 1000 * 1000 / 1165 ))   # ~1165 bytes per row with 1 KiB pages and the index
work=.build/bench-rotation
rm -rf "$work" && mkdir -p "$work" && cd "$work"
hex() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
old=$(hex)
printf "%-7s %-4s %12s %10s %10s %10s %8s %10s\n" mode run bytes rekey_ms verify_ms total_ms MB/s rss_kb
for mode in delete wal; do
  printf "PRAGMA key = \"x'%s'\";\nPRAGMA journal_mode=%s;\nCREATE TABLE big(id INTEGER PRIMARY KEY, tag TEXT, payload BLOB);\nCREATE INDEX big_tag ON big(tag);\nWITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x < %d) INSERT INTO big(tag, payload) SELECT 'tag'||(x%%97), randomblob(1000) FROM n;\nPRAGMA wal_checkpoint(TRUNCATE);\n" \
    "$old" "$mode" "$rows" | sqlcipher -batch base.sqlite >/dev/null
  for run in $(seq 1 "$runs"); do
    cp base.sqlite run.sqlite && rm -f run.sqlite-*
    printf "databases:\n  - path: run.sqlite\n    keys:\n      - id: old\n        hex: %s\n      - id: new\n        hex: %s\n" "$old" "$(hex)" > Keys
    sync
    /usr/bin/time -f "%M" -o rss.txt "$rekey" --db run.sqlite --json ${REKEY_ARGS:-} > out.json
    python3 - "$mode" "$run" "$(cat rss.txt)" <<'PY'
import json, sys
r = json.load(open("out.json"))["databases"][0]["rotation"]
print("%-7s %-4s %12d %10.0f %10.0f %10.0f %8.1f %10s" % (sys.argv[1], sys.argv[2], r["bytes"], r["rekeyMs"], r["verifyMs"], r["totalMs"], r["bytes"] / 1e6 / (r["totalMs"] / 1000), sys.argv[3]))
PY
  done
  for run in $(seq 1 "$runs"); do
    new=$(hex)
    cp base.sqlite raw.sqlite && rm -f raw.sqlite-* export.sqlite* && sync
    start=$(date +%s.%N)
    printf "PRAGMA key = \"x'%s'\";\nSELECT count(*) FROM sqlite_master;\nPRAGMA rekey = \"x'%s'\";\n" "$old" "$new" | sqlcipher -batch raw.sqlite >/dev/null
    middle=$(date +%s.%N)
    printf "PRAGMA key = \"x'%s'\";\nSELECT count(*) FROM sqlite_master;\nATTACH DATABASE 'export.sqlite' AS e KEY \"x'%s'\";\nSELECT sqlcipher_export('e');\n" "$old" "$new" | sqlcipher -batch base.sqlite >/dev/null
    end=$(date +%s.%N)
    bytes=$(stat -c %s base.sqlite)
    python3 -c "import sys; b=$bytes; r=$middle-$start; e=$end-$middle; print('%-7s %-4s %12d  engine PRAGMA rekey %6.0f ms (%5.1f MB/s)   sqlcipher_export %6.0f ms (%5.1f MB/s)' % ('$mode', '$run', b, r*1000, b/1e6/r, e*1000, b/1e6/e))"
  done
  rm -f base.sqlite* raw.sqlite* export.sqlite*
done
