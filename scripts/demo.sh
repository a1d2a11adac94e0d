#!/usr/bin/env bash
# The main job, end to end, on Debian 12 (SQLCipher 3.4.1) or Debian 13 (SQLCipher 4.6.1): makes a
# database encrypted with the OLDEST key of Keys.example with the sqlcipher shell, in the format that
# shell writes by default (SQLCipher 3 on Debian 12, SQLCipher 4 on Debian 13), then rotates it to the
# current key with `rekey` and checks the result with the same independent shell. Exits non-zero when
# any step does not do what it says. Everything happens in .build/demo; the keys are the public
# examples from Keys.example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== building rekey"
swift build --product rekey >/dev/null
rekey="$(swift build --show-bin-path)/rekey"

demo=.build/demo
rm -rf "$demo" && mkdir -p "$demo"
cp Keys.example "$demo/Keys"
chmod 600 "$demo/Keys"   # it holds passphrases: rekey refuses a Keys file with key material that others can read
cd "$demo"

# The demo's key material, as Keys.example expects it: a key file and an environment variable.
old_passphrase=$(sed -n 's/^ *passphrase: "\(.*\)"$/\1/p' Keys | head -n 1)
(umask 077 && echo "3c1f9e8d7b6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa99887766" > demo-2025-01.key)
export DEMO_DB_KEY_2025_06="demo current passphrase - not a secret"

# The shell with a key on standard input (never in argv) and then `settings`; SQLCipher 4's shell
# answers PRAGMA key with "ok", which is not shown.
shell() {  # shell <passphrase> <settings> <sql>
  printf ".output /dev/null\nPRAGMA key = '%s';\n%s\n.output stdout\n%s\n" "$1" "$2" "$3" | sqlcipher -batch -bail demo.sqlite
}
engine=$(echo "PRAGMA cipher_version;" | sqlcipher -batch :memory:)
echo "== creating demo.sqlite with the oldest key (2024-01) using the sqlcipher shell (SQLCipher $engine, its default format)"
shell "$old_passphrase" "" "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10000)
INSERT INTO notes(text) SELECT 'note ' || x FROM n;
PRAGMA user_version = 3;"

echo "== rekey --check (exit 3: needs rotation)"
status=0
"$rekey" --db demo.sqlite --check || status=$?
echo "(exit $status)"
[ $status -eq 3 ] || { echo "demo: expected exit 3 from rekey --check, got $status" >&2; exit 1; }
echo "== rekey"
"$rekey" --db demo.sqlite
echo "== rekey again (nothing to do)"
"$rekey" --db demo.sqlite
echo "== rekey --check --json"
"$rekey" --db demo.sqlite --check --json

echo "== the sqlcipher shell: the old key no longer opens the file"
if shell "$old_passphrase" "" "SELECT count(*) FROM notes;" 2>&1; then
  echo "demo: the old key still opens demo.sqlite" >&2
  exit 1
fi
echo "== the sqlcipher shell with the current key (2025-06): rows and user_version intact"
# The current key names no cipher: settings in Keys.example: the engine's own format, the shell's default.
result=$(shell "$DEMO_DB_KEY_2025_06" "" "SELECT 'notes: ' || count(*) FROM notes;
PRAGMA user_version;" | sed '2s/^/user_version: /')
echo "$result"
[ "$result" = $'notes: 10000\nuser_version: 3' ] || { echo "demo: unexpected content with the current key" >&2; exit 1; }
echo "== done: see $demo"
