#!/usr/bin/env bash
# The Vapor example (Examples/VaporTodos: Vapor, Fluent, the driver of Integrations/FluentEncryptedSQLite)
# under wrk while `rekey` rotates its database (issue 33): builds the app and `rekey`, starts the app on
# 127.0.0.1 over a new database on key k0, makes a project and a few todos, drives it with wrk
# (Examples/VaporTodos/load/todos.lua: 30% creates, 10% updates, 60% reads) and meanwhile rotates the file
# ROTATIONS times (append key k<n> to the Keys file, `rekey --db`). Then it stops the app with SIGTERM and
# reads the file with the independent sqlcipher shell: it must open with the newest key only, and every
# acknowledged write (a 201 with its id) must be there. Fails on any answer that is not 2xx, any socket
# error, any lost write; never on timings.
#   scripts/vapor-load-test.sh                      30 s, 16 connections, 3 rotations, debug build
#   DURATION=60 CONNECTIONS=32 ROTATIONS=5 CONFIGURATION=release scripts/vapor-load-test.sh
# Results: a line per run on stdout and in .build/vapor-load-test/results.md; logs in .build/vapor-load-test/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
duration=${DURATION:-30} connections=${CONNECTIONS:-16} rotations=${ROTATIONS:-3} configuration=${CONFIGURATION:-debug}
command -v wrk >/dev/null && command -v curl >/dev/null && command -v sqlcipher >/dev/null || scripts/setup.sh

work=$root/.build/vapor-load-test
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() { echo "vapor-load-test: FAIL: $*" >&2; failures=$(( failures + 1 )); }

echo "== building rekey (debug) and vapor-todos ($configuration)"
build_start=$SECONDS
swift build --product rekey >/dev/null
rekey=$root/.build/debug/rekey
swift build --package-path Examples/VaporTodos -c "$configuration" --product vapor-todos > "$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log" >&2; echo "vapor-load-test: the vapor-todos build failed" >&2; exit 1; }
server=$root/Examples/VaporTodos/.build/$configuration/vapor-todos
echo "   built in $(( SECONDS - build_start )) s"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"

newkey() {  # newkey <id>: a raw 256-bit key in <id>.key (hex), appended to the Keys file, atomically
  (umask 077
   od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$work/$1.key"
   { [ -f "$work/Keys" ] && cat "$work/Keys" || printf 'databases:\n  - path: todos.sqlite\n    keys:\n'
     printf '      - id: "%s"\n        file: %s.key\n        format: hex\n' "$1" "$1"; } > "$work/Keys.new"
   mv "$work/Keys.new" "$work/Keys")
}
shell() {  # shell <key id> <sql>: the sqlcipher shell with that key (given on standard input)
  printf ".output /dev/null\nPRAGMA key = \"x'%s'\";\n.output stdout\n%s\n" "$(cat "$work/$1.key")" "$2" \
    | sqlcipher -batch -bail "$work/todos.sqlite"
}

newkey k0
(cd "$work" && DATABASE_PATH=todos.sqlite KEYS_FILE=Keys exec "$server" serve --env production --log warning \
   --hostname 127.0.0.1 --port "$port" >> server.log 2>&1) &
server_pid=$!
for _ in $(seq 1 600); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" 2>/dev/null)" = 200 ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; echo "vapor-load-test: the app did not start" >&2; exit 1; }
  sleep 0.1
done
project=$(curl -sf -X POST -H 'Content-Type: application/json' -d '{"name":"load"}' "$url/projects" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
[ -n "$project" ] || { echo "vapor-load-test: could not make the project" >&2; exit 1; }
seed=20
for n in $(seq 1 $seed); do
  curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' -d "{\"title\":\"seed $n\"}" "$url/projects/$project/todos" \
    || { echo "vapor-load-test: could not make todo $n" >&2; exit 1; }
done

TODOS_IDS_FILE="$work/acked" TODOS_PROJECT=$project TODOS_SEED=$seed \
  wrk -t 2 -c "$connections" -d "${duration}s" --timeout 30s -s Examples/VaporTodos/load/todos.lua "$url" > "$work/wrk.out" 2>&1 &
wrk_pid=$!
rekey_seconds=()
for n in $(seq 1 "$rotations"); do
  sleep "$(python3 -c "print($duration / ($rotations + 1))")"   # spreads the rotations over the run (not an order)
  newkey "k$n"
  start=$EPOCHREALTIME
  out=$("$rekey" --keys "$work/Keys" --db "$work/todos.sqlite" --busy-timeout 30 2>&1) || fail "rekey to k$n: $out"
  echo "$out" >> "$work/rekey.log"
  rekey_seconds+=("$(python3 -c "print(f'{$EPOCHREALTIME - $start:.2f}')")")
done
wait "$wrk_pid" || fail "wrk exited $?"
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
[ $status -eq 0 ] || fail "vapor-todos exited $status after SIGTERM"

result() { sed -n 's/^RESULT .*\b'"$1"'=\([^ ]*\).*/\1/p' "$work/wrk.out"; }
[ -n "$(result requests)" ] || { cat "$work/wrk.out" >&2; fail "wrk printed no RESULT line"; }
newest=k$rotations
cat "$work"/acked.* 2>/dev/null | sort -n > "$work/acked-ids" || true
shell "$newest" "SELECT id FROM todos ORDER BY id;" > "$work/found-ids" 2> "$work/shell.err" \
  || fail "the sqlcipher shell cannot read the file with the newest key $newest: $(cat "$work/shell.err")"
acked=$(wc -l < "$work/acked-ids")
lost=$(comm -23 <(sort "$work/acked-ids") <(sort "$work/found-ids") | wc -l)
[ "$lost" -eq 0 ] || fail "$lost acknowledged writes are not in the file"
[ "$(result created)" = "$acked" ] || fail "wrk counted $(result created) 201s but recorded $acked ids"
for n in $(seq 0 $(( rotations - 1 ))); do
  ! shell "k$n" "SELECT count(*) FROM todos;" > /dev/null 2>&1 || fail "the old key k$n still opens the file"
done
http_errors=$(result non_2xx)
socket_errors=$(( $(result connect_errors) + $(result read_errors) + $(result write_errors) + $(result timeouts) ))
[ "$http_errors" = 0 ] || fail "$http_errors answers were not 2xx (see $work/server.log)"
[ "$socket_errors" = 0 ] || fail "$socket_errors socket errors"

{
  echo "| engine | build | connections | seconds | requests/s | p50 ms | p99 ms | max ms | HTTP errors | socket errors | writes acked | acked missing | rotations (rekey s) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  echo "| $(echo 'PRAGMA cipher_version;' | sqlcipher -batch :memory:) | $configuration | $connections | $(result seconds) | $(result rps) | $(result p50_ms) | $(result p99_ms) | $(result max_ms) | $http_errors | $socket_errors | $acked | $lost | $rotations ($(IFS=,; echo "${rekey_seconds[*]}")) |"
} | tee "$work/results.md"
if [ $failures -gt 0 ]; then
  echo "vapor-load-test: $failures failures" >&2
  exit 1
fi
echo "vapor-load-test: no HTTP error, no lost write, the file on $newest only"
