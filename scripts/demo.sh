#!/usr/bin/env bash
# The main job, end to end: makes a database encrypted with the OLDEST key of Keys.example, then
# rotates it to the current key with `rekey` and shows the result with the independent sqlcipher shell.
# Everything happens in .build/demo; the keys are the public examples from Keys.example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== building rekey"
swift build --product rekey >/dev/null
rekey="$(swift build --show-bin-path)/rekey"

demo=.build/demo
rm -rf "$demo" && mkdir -p "$demo"
cp Keys.example "$demo/Keys"
cd "$demo"

# The demo's key material, as Keys.example expects it: a key file and an environment variable.
old_passphrase=$(sed -n 's/^ *passphrase: "\(.*\)"$/\1/p' Keys | head -n 1)
(umask 077 && echo "3c1f9e8d7b6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa99887766" > demo-2025-01.key)
export DEMO_DB_KEY_2025_06="demo current passphrase - not a secret"

echo "== creating demo.sqlite with the oldest key (2024-01) using the sqlcipher shell"
sqlcipher -batch demo.sqlite <<SQL
PRAGMA key = '$old_passphrase';
CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10000)
INSERT INTO notes(text) SELECT 'note ' || x FROM n;
PRAGMA user_version = 3;
SQL

echo "== rekey --check (exit 3: needs rotation)"
"$rekey" --db demo.sqlite --check || echo "(exit $?)"
echo "== rekey"
"$rekey" --db demo.sqlite
echo "== rekey again (nothing to do)"
"$rekey" --db demo.sqlite
echo "== rekey --check --json"
"$rekey" --db demo.sqlite --check --json

echo "== the sqlcipher shell: the old key no longer opens the file"
printf "PRAGMA key = '%s';\nSELECT count(*) FROM notes;\n" "$old_passphrase" | sqlcipher -batch demo.sqlite 2>&1 || true
echo "== the sqlcipher shell with the current key (2025-06): rows and user_version intact"
printf "PRAGMA key = '%s';\nSELECT 'notes: ' || count(*) FROM notes;\nPRAGMA user_version;\n" "$DEMO_DB_KEY_2025_06" | sqlcipher -batch demo.sqlite | sed '2s/^/user_version: /'
echo "== done: see $demo"
