#!/usr/bin/env bash
# Builds and tests EncryptedSQLite against a SQLCipher 4 engine: Debian trixie's libsqlcipher-dev
# (4.6.x) and its sqlcipher shell, in a debootstrap root beside the repository, with this
# machine's Swift toolchain and Swift package mirror bind-mounted. Needs root (debootstrap,
# chroot, mount) and Debian's package servers. Takes 10-15 minutes the first time;
# later runs reuse the root and the build folder inside it.
#   scripts/sqlcipher4-check.sh                  every test
#   scripts/sqlcipher4-check.sh --filter Rotation
# Set SQLCIPHER4_ROOT to choose where the trixie root goes (default: ../sqlcipher4-root).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/sqlcipher4-root.sh
echo "== this repository's HEAD, built and tested against that engine"
sqlcipher4_run "swift build --build-tests && swift test $*"
