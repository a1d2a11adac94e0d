#!/usr/bin/env bash
# The mutation pass: puts one safety defect at a time into a scratch copy of this repository's HEAD,
# runs the tests that must catch it, and prints a table: caught or SURVIVED, by which test, how long.
#   scripts/mutate.sh                    every mutant in Tests/Mutants/
#   scripts/mutate.sh pin-env lease      only the mutants whose file name contains one of the words
#   scripts/mutate.sh --list             the mutants, what each breaks and the tests that must catch it
# A mutant is a small patch, Tests/Mutants/NN-name.patch, whose header says what it breaks
# ("Mutant:"), which tests must catch it ("Tests:", a `swift test --filter` pattern) and, if they
# need it, variables for the run ("Env:"). Run the pass whenever a safety check changes, and add a
# mutant for each new one (Tests/README.md, "Mutation pass").
# The scratch copy and its build stay in .build-mutants/ (ignored by git) between runs, so only the
# first run builds everything. Each mutant is built (a mutant that does not build is reported as
# BROKEN, the pass fails), then its tests run on this machine's engine. Exit status 0 only when
# every mutant selected was caught. Needs what scripts/setup.sh installs.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
mutants_dir=$repo/Tests/Mutants
scratch=${MUTATE_DIR:-$repo/.build-mutants}/tree
log_dir=${MUTATE_DIR:-$repo/.build-mutants}/logs

field() {  # field <name> <patch>: the header line "name: value", value only
  sed -n "/^diff --git/q; s/^$1: //p" "$2" | head -n 1
}

selected=()
for patch in "$mutants_dir"/*.patch; do
  name=$(basename "$patch" .patch)
  if [ $# -eq 0 ] || [ "$1" = --list ]; then selected+=("$patch"); continue; fi
  for word in "$@"; do
    case $name in *"$word"*) selected+=("$patch"); break ;; esac
  done
done
if [ "${1:-}" = --list ]; then
  for patch in "${selected[@]}"; do
    printf '%s\n  breaks: %s\n  caught by: %s\n' "$(basename "$patch" .patch)" "$(field Mutant "$patch")" "$(field Tests "$patch")"
  done
  exit 0
fi
[ ${#selected[@]} -gt 0 ] || { echo "mutate: no mutant matches $*" >&2; exit 2; }

scripts/setup.sh >/dev/null || exit 1
mkdir -p "$log_dir"
# The scratch copy: HEAD of this repository, reset before every mutant (its .build stays).
if [ ! -d "$scratch/.git" ]; then
  mkdir -p "$(dirname "$scratch")"
  git clone -q "$repo" "$scratch" || exit 1
fi
reset_scratch() {
  git -C "$scratch" reset -q --hard "$head" && git -C "$scratch" clean -qfd -e .build
}
git -C "$scratch" fetch -q "$repo" HEAD || exit 1
head=$(git -C "$scratch" rev-parse FETCH_HEAD)
reset_scratch || exit 1

# Every patch must apply to HEAD before anything is built: a patch that no longer applies is
# a mutant to update, not one that was caught.
for patch in "${selected[@]}"; do
  git -C "$scratch" apply --check "$patch" 2>/dev/null || { echo "mutate: $(basename "$patch") does not apply to HEAD; update it" >&2; exit 2; }
done

echo "== mutation pass: ${#selected[@]} mutants on $(git -C "$scratch" log -1 --format='%h %s' "$head" | cut -c1-60)"
echo "   SQLCipher $(dpkg-query -W -f '${Version}' libsqlcipher-dev 2>/dev/null || pkg-config --modversion sqlcipher); logs in $log_dir"
start=$(date +%s)
rows=()
failures=0
for patch in "${selected[@]}"; do
  name=$(basename "$patch" .patch)
  tests=$(field Tests "$patch")
  variables=$(field Env "$patch")
  log=$log_dir/$name.log
  began=$(date +%s)
  reset_scratch
  git -C "$scratch" apply "$patch"
  if ! (cd "$scratch" && swift build --build-tests) > "$log" 2>&1; then
    verdict=BROKEN; by="the mutant does not build (see $log)"
  else
    # shellcheck disable=SC2086  # Env: holds NAME=value words
    # A mutant can make a test wait forever (a rotation that never ends): after MUTATE_TEST_LIMIT
    # seconds (300) the run gets SIGQUIT, then SIGKILL, and counts as caught ("hung").
    (cd "$scratch" && env $variables timeout --signal=QUIT --kill-after=20 "${MUTATE_TEST_LIMIT:-300}" \
      swift test --skip-build --filter "$tests") >> "$log" 2>&1
    status=$?
    hung=""
    [ $status -eq 124 ] || [ $status -eq 137 ] && hung=" (hung: stopped after ${MUTATE_TEST_LIMIT:-300} s)"
    # Swift Testing's failure lines: ✘ Test "display name" recorded an issue … / failed after …
    failed=$(grep -aoE '^✘ Test "[^"]*"' "$log" | sed -E 's/^✘ Test //' | sort -u | head -n 3 | paste -sd ';' -)
    started=$(grep -ac '^◇ Test "' "$log")  # a test process that crashes prints no total
    if [ "$started" -eq 0 ]; then
      verdict=BROKEN; by="no test matches \"$tests\""
    elif [ $status -ne 0 ]; then
      verdict=caught; by="${failed:-"swift test exited $status (see $log)"}$hung"
    else
      verdict=SURVIVED; by="\"$tests\" passed"
    fi
  fi
  [ "$verdict" = caught ] || failures=$((failures + 1))
  seconds=$(( $(date +%s) - began ))
  printf '%-9s %4d s  %s\n' "$verdict" "$seconds" "$name"
  rows+=("$(printf '%s|%s|%s|%s' "$name" "$verdict" "$seconds" "$by")")
done
reset_scratch
# Leave the scratch build matching HEAD, so that the next run starts from an unmutated build.
(cd "$scratch" && swift build --build-tests) > "$log_dir/restore.log" 2>&1

echo
printf '| %s | %s | %s | %s |\n|---|---|---|---|\n' mutant verdict seconds "failing tests (first 3) or why"
for row in "${rows[@]}"; do
  IFS='|' read -r name verdict seconds by <<< "$row"
  printf '| %s | %s | %s | %s |\n' "$name" "$verdict" "$seconds" "$by"
done
echo
echo "mutation pass: $(( ${#selected[@]} - failures )) of ${#selected[@]} caught in $(( $(date +%s) - start )) s"
[ $failures -eq 0 ]
