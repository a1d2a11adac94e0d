#!/usr/bin/env bash
# Load under key rotation with a real HTTP client (issue 25): builds the example service
# Examples/NotesServer and `rekey`, starts the service on 127.0.0.1 over a fresh database made with
# an old key, drives it with wrk (Examples/NotesServer/load/notes.lua: 30% writes, 70% reads) for a
# fixed time at a fixed connection count, and meanwhile rotates the database with `rekey` (append a
# key to the Keys file, `rekey --db …`). Afterwards the service is stopped with SIGTERM and the file
# is read with the independent sqlcipher shell under the newest key: every acknowledged write (a 201
# with its id) must be there.
#
#   scripts/load-test.sh                       both runs, without and with 3 rotations (30 s each, 16 connections)
#   scripts/load-test.sh --size-mb 1000        the same on a database seeded to 1 GB first
#   scripts/load-test.sh --kill 5              kill -9 the service in the middle of a rotation 5 times, restart it
#   scripts/load-test.sh --stress              --kill 20 --kill-only (the kill run alone)
#   scripts/load-test.sh --ci                  the CI size: 20 s runs, 8 connections, small database, 3 kills,
#                                              debug build; fails on any HTTP error or lost write, never on timings
# Every run but --kill-only then fuzzes the API (Examples/NotesServer/load/fuzz.py, issue 36): --fuzz N
# requests (default 2000; 0 for none) drawn from --fuzz-seed S (default random; the seed is printed, give
# it back to replay); fails on a 5xx other than 503, SQL or a path in an answer, an unanswered
# well-formed request, an internal error in the server's log, or a server unhealthy afterwards.
# Options: --duration S  --connections N  --threads N  --rotations N  --size-mb N  --kill N
#          --release (build the service in release mode; the default outside --ci)  --debug
#          --kill-size-mb N (the kill run's database, default 20, so that a rotation lasts long enough to be hit)
#          --busy-timeout S (the service's, default 10: how long a request waits for rekey's lock before a 503)
#          --kill-only (no load runs before the kill run, no fuzz)  --fuzz N  --fuzz-seed S
#          --strategy automatic|engineRekey (rekey's)  --keep (leave the work folder)  --no-compare (rotation run only)
# Results: a Markdown table on stdout and in .build/load-test/results.md; every log in .build/load-test/.
# Loopback only: wrk sends to 127.0.0.1, every loop is bounded in count and time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

duration=30 connections=16 threads=2 rotations=3 size_mb=0 kills=0 configuration=release strategy=automatic compare=1
kill_seconds=8 kill_size_mb=20 busy_timeout=10 kill_only=0 fuzz_requests=2000 fuzz_seed=""
while [ $# -gt 0 ]; do
  case $1 in
    --ci) duration=20 connections=8 kills=3 configuration=debug ;;
    --stress) kills=20 kill_only=1 ;;
    --kill-only) kill_only=1 ;;
    --duration) duration=$2; shift ;;
    --connections) connections=$2; shift ;;
    --threads) threads=$2; shift ;;
    --rotations) rotations=$2; shift ;;
    --size-mb) size_mb=$2; shift ;;
    --kill) kills=$2; shift ;;
    --kill-size-mb) kill_size_mb=$2; shift ;;
    --busy-timeout) busy_timeout=$2; shift ;;
    --release) configuration=release ;;
    --debug) configuration=debug ;;
    --strategy) strategy=$2; shift ;;
    --no-compare) compare=0 ;;
    --fuzz) fuzz_requests=$2; shift ;;
    --fuzz-seed) fuzz_seed=$2; shift ;;
    *) echo "load-test: unknown option $1 (see the comment at the top of $0)" >&2; exit 64 ;;
  esac
  shift
done

command -v wrk >/dev/null && command -v curl >/dev/null && command -v sqlcipher >/dev/null || scripts/setup.sh

work=$root/.build/load-test
rm -rf "$work" && mkdir -p "$work"
results=$work/results.md
fail() { echo "load-test: FAIL: $*" >&2; echo "$*" >> "$work/failures"; }   # a file: fail also runs in $( ) subshells

echo "== building rekey (debug) and notes-server ($configuration)"
build_start=$SECONDS
swift build --product rekey >/dev/null
rekey="$root/.build/debug/rekey"
# A debug build (CI's) makes the example's test target too: the CI phase after this one runs those tests
# (swift test) on this build folder, and a build of the product alone compiles Hummingbird with other
# flags than a test build does, so that phase compiled it again (21-28 s).
build_what=(--product notes-server)
[ "$configuration" = debug ] && build_what=(--build-tests)
swift build --package-path Examples/NotesServer -c "$configuration" "${build_what[@]}" > "$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log" >&2; echo "load-test: the notes-server build failed" >&2; exit 1; }
grep -E "(warning|error):" "$work/build.log" | grep -v "/\.build/checkouts/\|'swift-distributed-tracing'" || true   # the example's own warnings
server="$root/Examples/NotesServer/.build/$configuration/notes-server"
echo "   built in $(( SECONDS - build_start )) s"
engine=$(echo "PRAGMA cipher_version;" | sqlcipher -batch :memory:)

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"

newkey() {  # newkey <dir> <id>: a raw 256-bit key in <dir>/<id>.key (hex), appended to <dir>/Keys, atomically
  local dir=$1 id=$2
  (umask 077
   od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$dir/$id.key"
   { [ -f "$dir/Keys" ] && cat "$dir/Keys" || printf 'databases:\n  - path: notes.sqlite\n    keys:\n'
     printf '      - id: "%s"\n        file: %s.key\n        format: hex\n' "$id" "$id"; } > "$dir/Keys.new"
   mv "$dir/Keys.new" "$dir/Keys")
}
shell_ids() {  # shell_ids <dir> <key id>: every note id, read by the sqlcipher shell with that key
  printf ".output /dev/null\nPRAGMA key = \"x'%s'\";\n.output stdout\nSELECT id FROM notes ORDER BY id;\n" "$(cat "$1/$2.key")" \
    | sqlcipher -batch -bail "$1/notes.sqlite"
}
start_server() {  # start_server <dir>: starts it in the background (pid in $server_pid)
  (cd "$1" && exec "$server" serve --db notes.sqlite --keys Keys --port "$port" --readers 4 --busy-timeout "$busy_timeout" >> server.log 2>&1) &
  server_pid=$!
}
wait_up() {  # wait_up: until GET /notes answers 200 (at most 60 s); prints the seconds waited
  local start=$EPOCHREALTIME
  for _ in $(seq 1 1200); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/notes?limit=1" 2>/dev/null)" = 200 ]; then
      python3 -c "print(f'{$EPOCHREALTIME - $start:.2f}')"
      return 0
    fi
    sleep 0.05
  done
  echo "timeout"
  return 1
}
stop_server() {  # stop_server <dir>: SIGTERM, wait; checks a clean exit and that the WAL was checkpointed away
  kill -TERM "$server_pid"
  local status=0
  wait "$server_pid" || status=$?
  [ $status -eq 0 ] || fail "$1: notes-server exited $status after SIGTERM"
  grep -q '"*connectionsClosed"*[:=] *"*true' "$1/server.log" || grep -q 'connectionsClosed=true\|connectionsClosed: true' "$1/server.log" \
    || fail "$1: the service did not log that every connection closed"
  [ ! -e "$1/notes.sqlite-wal" ] || fail "$1: a -wal file is left after a graceful shutdown"
}
run_wrk() {  # run_wrk <dir> <seconds> <seed rows> <tag>: wrk in the background (pid in $wrk_pid)
  NOTES_IDS_FILE="$1/acked" NOTES_SEED_ROWS=$3 \
    wrk -t "$threads" -c "$connections" -d "${2}s" --timeout 30s -s Examples/NotesServer/load/notes.lua "$url" > "$1/wrk-$4.out" 2>&1 &
  wrk_pid=$!
}
result() {  # result <file> <key>: a value of wrk's RESULT line
  sed -n 's/^RESULT .*\b'"$2"'=\([^ ]*\).*/\1/p' "$1"
}
prepare_db() {  # prepare_db <dir> <MB>: Keys with one old key; seeded to <MB>; prints the rows it has
  mkdir -p "$1"
  newkey "$1" k0
  if [ "$2" -gt 0 ]; then
    (cd "$1" && "$server" seed --db notes.sqlite --keys Keys --size-mb "$2" --log-level warning) | sed -n 's/^seeded .*: \([0-9]*\) rows.*/\1/p'
  else
    echo 0
  fi
}
rotate() {  # rotate <dir> <n>: appends key k<n>, runs rekey; prints its line
  newkey "$1" "k$2"
  local start=$EPOCHREALTIME status=0 out
  out=$("$rekey" --keys "$1/Keys" --db "$1/notes.sqlite" --strategy "$strategy" --busy-timeout 30 2>&1) || status=$?
  echo "$out" >> "$1/rekey.log"
  [ $status -eq 0 ] || fail "$1: rekey to k$2 exited $status: $out"
  python3 -c "print(f'{$EPOCHREALTIME - $start:.2f}')"
}
check_rows() {  # check_rows <dir> <newest key id> <seed rows>: acknowledged ids against the rows under the newest key
  local dir=$1
  cat "$dir"/acked.* 2>/dev/null | sort -n > "$dir/acked-ids" || true
  if ! shell_ids "$dir" "$2" > "$dir/found-ids" 2> "$dir/shell.err"; then
    fail "$dir: the sqlcipher shell cannot read the file with the newest key $2: $(cat "$dir/shell.err")"
  fi
  acked=$(wc -l < "$dir/acked-ids")
  lost=$(comm -23 <(sort "$dir/acked-ids") <(sort "$dir/found-ids") | wc -l)
  found_new=$(( $(wc -l < "$dir/found-ids") - $3 ))
  [ "$lost" -eq 0 ] || fail "$dir: $lost acknowledged writes are not in the file"
}

echo "== SQLCipher $engine, notes-server $configuration, wrk -t$threads -c$connections -d${duration}s, database ${size_mb} MB, rotations $rotations ($strategy)"
[ "$kill_only" = 1 ] || {
  echo "SQLCipher $engine; notes-server ($configuration build, 4 readers, busy timeout ${busy_timeout} s); wrk -t$threads -c$connections -d${duration}s, Examples/NotesServer/load/notes.lua (30% POST, 70% GET);"
  echo "database seeded to ${size_mb} MB with key k0; rotations with \`rekey --db\` ($strategy) at even intervals; 2 cores"
  echo
  echo "| run | requests/s | p50 ms | p99 ms | max ms | HTTP errors | socket errors | writes acked | rows found new | acked missing | rekey s | start s |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
} > "$results"

load_run() {  # load_run <name> <rotations>
  local name=$1 count=$2 dir=$work/$1 seed start_s rekeys="" current=k0
  seed=$(prepare_db "$dir" "$size_mb")
  start_server "$dir"
  start_s=$(wait_up) || { fail "$name: the service did not come up"; cat "$dir/server.log" >&2; return; }
  run_wrk "$dir" "$duration" "$seed" main
  local began=$EPOCHREALTIME
  for n in $(seq 1 "$count"); do
    # Rotation n starts at n/(count+1) of the run (later when the one before took longer).
    sleep "$(python3 -c "print(max(0, $began + $duration * $n / ($count + 1) - $EPOCHREALTIME))")"
    rekeys="$rekeys${rekeys:+ }$(rotate "$dir" "$n")"
    current=k$n
    curl -s "$url/metrics" | grep '^encryptedsqlite_live_rekeys_total' > "$dir/metrics-after-k$n.txt" || true
  done
  wait "$wrk_pid" || fail "$name: wrk exited non-zero"
  curl -s "$url/metrics" > "$dir/metrics.txt"
  curl -s "$url/health?fresh=1" > "$dir/health.json"
  grep -q "\"currentKeyID\":\"$current\"" "$dir/health.json" && grep -q '"needsRotation":false' "$dir/health.json" \
    || fail "$name: /health does not say the file is on $current: $(cat "$dir/health.json")"
  stop_server "$dir"
  check_rows "$dir" "$current" "$seed"
  local out=$dir/wrk-main.out http socket
  http=$(result "$out" non_2xx)
  socket=$(( $(result "$out" connect_errors) + $(result "$out" read_errors) + $(result "$out" write_errors) + $(result "$out" timeouts) ))
  [ "${http:-1}" -eq 0 ] || fail "$name: $http HTTP errors ($(result "$out" statuses))"
  [ "$socket" -eq 0 ] || fail "$name: $socket socket errors"
  [ "$(result "$out" created)" = "$acked" ] || fail "$name: wrk counted $(result "$out" created) 201s but recorded $acked ids"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$(result "$out" rps)" "$(result "$out" p50_ms)" \
    "$(result "$out" p99_ms)" "$(result "$out" max_ms)" "$http" "$socket" "$acked" "$found_new" "$lost" "${rekeys:--}" "$start_s" >> "$results"
  echo "   $name: $(grep '^RESULT' "$out")"
}

if [ "$kill_only" = 0 ]; then
  [ "$compare" = 1 ] && load_run "no rotation" 0
  load_run "$rotations rotations" "$rotations"
fi

fuzz_run() {  # the seeded fuzz against a service of its own; its summary line goes in the results
  local dir=$work/fuzz out
  prepare_db "$dir" 0 > /dev/null
  start_server "$dir"
  wait_up > /dev/null || { fail "fuzz: the service did not come up"; return; }
  python3 Examples/NotesServer/load/fuzz.py --port "$port" --requests "$fuzz_requests" ${fuzz_seed:+--seed "$fuzz_seed"} \
    --forbid "$dir" > "$dir/fuzz.out" 2>&1 || fail "fuzz: $(grep 'FAIL\|seed' "$dir/fuzz.out" | head -n 6 | tr '\n' ' ')"
  stop_server "$dir"
  ! grep -q 'request failed' "$dir/server.log" || fail "fuzz: the service logged an internal error: $(grep 'request failed' "$dir/server.log" | head -n 2)"
  out=$(grep '^FUZZ' "$dir/fuzz.out" || echo "FUZZ (no summary: see $dir/fuzz.out)")
  printf '\nFuzz (Examples/NotesServer/load/fuzz.py): %s\n' "$out" >> "$results"
  echo "   $(head -n 1 "$dir/fuzz.out"); $out"
}
if [ "$kill_only" = 0 ] && [ "$fuzz_requests" -gt 0 ]; then
  fuzz_run
fi

kill_run() {  # kill -9 the service while rekey rotates, restart it; $kills cycles of $kill_seconds s of load
  local dir=$work/kill seed base current=k0
  seed=$(prepare_db "$dir" "$kill_size_mb")
  start_server "$dir"
  base=$(wait_up) || { fail "kill: the service did not come up"; return; }
  {
    echo
    echo "SQLCipher $engine, notes-server $configuration build. kill -9 during a rotation: $kills cycles of ${kill_seconds} s of load each (wrk -c$connections) on a ${kill_size_mb} MB database. In each cycle"
    echo "key k<n> is appended and \`rekey --db\` started; after a random delay between 0.1 s and the last rotation's time plus 0.1 s (rekey's start-up)"
    echo "the service is killed with SIGKILL (and rekey with it in even cycles), and restarted at once. First start-up: ${base} s."
    echo
    echo "| cycle | kill after s | rekey running at kill | rekey killed | back up in s | restarted service's open | HTTP errors | socket errors (wrk's connect retries) | writes acked | rekey |"
    echo "|---:|---:|---|---|---:|---|---:|---:|---:|---|"
  } >> "$results"
  local last_rekey=0.5 total_http=0 total_socket=0
  for n in $(seq 1 "$kills"); do
    run_wrk "$dir" "$kill_seconds" "$seed" "cycle-$n"
    sleep 2
    newkey "$dir" "k$n"
    local rstart=$EPOCHREALTIME delay
    "$rekey" --keys "$dir/Keys" --db "$dir/notes.sqlite" --strategy "$strategy" --busy-timeout 30 > "$dir/rekey-$n.log" 2>&1 &
    local rekey_pid=$!
    delay=$(python3 -c "import random; print(round(random.uniform(0.1, $last_rekey), 3))")
    sleep "$delay"
    local running=no killed_rekey=no
    kill -0 "$rekey_pid" 2>/dev/null && running=yes
    kill -KILL "$server_pid"
    if [ $(( n % 2 )) -eq 0 ] && [ $running = yes ]; then kill -KILL "$rekey_pid" 2>/dev/null && killed_rekey=yes; fi
    local killed_at=$EPOCHREALTIME
    wait "$server_pid" 2>/dev/null || true
    start_server "$dir"
    local up
    wait_up > /dev/null || fail "kill cycle $n: the service did not come back"
    up=$(python3 -c "print(f'{$EPOCHREALTIME - $killed_at:.2f}')")
    local rstatus=0 rekey_result
    wait "$rekey_pid" 2>/dev/null || rstatus=$?
    if [ $killed_rekey = yes ]; then
      rekey_result="killed"
    else
      [ $rstatus -eq 0 ] || fail "kill cycle $n: rekey exited $rstatus: $(cat "$dir/rekey-$n.log")"
      # The next kill lands within this rekey's rotation as it reported it, after its start-up (about 0.1 s).
      last_rekey=$(sed -n 's/.* in \([0-9]*\) ms.*/\1/p' "$dir/rekey-$n.log" | head -n 1 | python3 -c "import sys; t = sys.stdin.read().strip(); print(round(0.1 + int(t or 400) / 1000, 3))")
      rekey_result="exit $rstatus, $(grep -o 'rotated to "k[0-9]*" in [0-9]* ms\|already on the current key' "$dir/rekey-$n.log" | head -n 1)"
    fi
    cat "$dir/rekey-$n.log" >> "$dir/rekey.log"
    current=k$n
    wait "$wrk_pid" || true
    local out=$dir/wrk-cycle-$n.out http socket
    http=$(result "$out" non_2xx)
    socket=$(( $(result "$out" connect_errors) + $(result "$out" read_errors) + $(result "$out" write_errors) + $(result "$out" timeouts) ))
    total_http=$(( total_http + http )) total_socket=$(( total_socket + socket ))
    local opened
    opened=$(grep 'database open' "$dir/server.log" | tail -n 1 | grep -o 'openedWith=[^ ]*\|rotated=[a-z]*' | tr '\n' ' ')
    echo "| $n | $delay | $running | $killed_rekey | $up | ${opened% } | $http | $socket | $(result "$out" created) | $rekey_result |" >> "$results"
    python3 -c "import sys; sys.exit(0 if $up < 15 else 1)" || fail "kill cycle $n: back up after $up s"
  done
  # The restarted service rotated the file itself where rekey was killed: the newest key must open it.
  [ "$(curl -s "$url/health?fresh=1" | grep -o '"needsRotation":[a-z]*')" = '"needsRotation":false' ] || fail "kill: /health says the file needs rotation"
  stop_server "$dir"
  check_rows "$dir" "$current" "$seed"
  echo >> "$results"
  echo "After $kills kills: $acked writes acknowledged, $lost missing under the newest key ($current), $found_new rows found new; $total_http HTTP errors and $total_socket socket errors in all cycles." >> "$results"
  echo "   kill: $acked acknowledged, $lost missing, $total_http HTTP errors, $total_socket socket errors during the outages"
}
[ "$kills" -gt 0 ] && kill_run

echo
cat "$results"
if [ -s "$work/failures" ]; then
  echo "load-test: $(wc -l < "$work/failures") failure(s):" >&2
  sed 's/^/  /' "$work/failures" >&2
  exit 1
fi
echo "load-test: no HTTP error, no lost write"
