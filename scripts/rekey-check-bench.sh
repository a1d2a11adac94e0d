#!/usr/bin/env bash
# Times `rekey --check --all` over N databases (default 150) as a new user sets them up, three ways
# (Benchmarks/Fleet.md, "rekey --check --all over 150 files"):
#   W   one wrapped data key per entry, under a passphrase KEK (passphrase: + salt:)
#   W2  the same after `rekey keys rewrap` to a KEK read from a key file (no derivation)
#   P   one passphrase per entry
# The databases are made by the `sqlcipher` shell; the wrapped keys by `rekey keys new --wrapped`,
# then `rekey --all` (setup, not timed). Prints each command's wall time, median of RUNS (default 3).
#   scripts/rekey-check-bench.sh                 150 files, 3 runs, in a new temporary folder
#   N=50 RUNS=5 scripts/rekey-check-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-150}
runs=${RUNS:-3}
swift build -c release --product rekey >/dev/null
rekey="$(swift build -c release --show-bin-path)/rekey"
command -v sqlcipher >/dev/null || { echo "rekey-check-bench: needs the sqlcipher shell (scripts/setup.sh installs it)" >&2; exit 1; }
base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
chmod 700 "$base"
mkdir -m 700 "$base/W" "$base/P"
random() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
{ echo "key_encryption_keys:"; echo "  - id: kek-1"; echo "    passphrase: \"fleet master $(random 12)\""
  echo "    salt: $(random 16)"; echo "databases:"; } > "$base/W/Keys"
echo "databases:" > "$base/P/Keys"
for i in $(seq 0 $((n - 1))); do
  seed="seed $i $(random 8)"
  passphrase="tenant $i $(random 8)"
  sql="CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES ('n');"
  sqlcipher "$base/W/db-$i.sqlite" "PRAGMA key='$seed'; $sql" >/dev/null
  sqlcipher "$base/P/db-$i.sqlite" "PRAGMA key='$passphrase'; $sql" >/dev/null
  printf '  - path: db-%s.sqlite\n    keys:\n      - id: seed\n        passphrase: "%s"\n' "$i" "$seed" >> "$base/W/Keys"
  printf '  - path: db-%s.sqlite\n    keys:\n      - id: p\n        passphrase: "%s"\n' "$i" "$passphrase" >> "$base/P/Keys"
done
chmod 600 "$base/W/Keys" "$base/P/Keys"
for i in $(seq 0 $((n - 1))); do
  "$rekey" keys new --keys "$base/W/Keys" --for "db-$i.sqlite" --id data-1 --wrapped --no-created >/dev/null
done
"$rekey" --keys "$base/W/Keys" --all >/dev/null
# The files are on their wrapped keys now: the seed passphrases leave the entries.
python3 - "$base/W/Keys" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
open(sys.argv[1], 'w').write(re.sub(r'      - id: seed\n        passphrase: "[^"]*"\n', '', text))
PY
# W2: the same databases' keys rewrapped by a KEK from a key file, then the passphrase KEK dropped.
mkdir -m 700 "$base/W2"
cp -p "$base"/W/db-*.sqlite "$base/W2/"
head -c 32 /dev/urandom > "$base/W2/kek.key" && chmod 600 "$base/W2/kek.key"
python3 - "$base/W/Keys" "$base/W2/Keys" <<'PY'
import sys
text = open(sys.argv[1]).read()
at = text.index('databases:')
open(sys.argv[2], 'w').write(text[:at] + '  - id: kek-2\n    file: kek.key\n    format: binary\n' + text[at:])
PY
chmod 600 "$base/W2/Keys"
"$rekey" keys rewrap --keys "$base/W2/Keys" >/dev/null
python3 - "$base/W2/Keys" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
open(sys.argv[1], 'w').write(re.sub(r'  - id: kek-1\n    passphrase: "[^"]*"\n    salt: [0-9a-f]+\n', '', text))
PY
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for set in W W2 P; do
  for run in $(seq "$runs"); do
    start=$(date +%s.%N)
    "$rekey" --keys "$base/$set/Keys" --check --all >/dev/null
    end=$(date +%s.%N)
    echo "$end - $start" | bc
  done | median | xargs printf "rekey --check --all, %s: %.3f s (median of $runs)\n" "$set"
done
