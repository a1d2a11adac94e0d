#!/usr/bin/env bash
# Installs what EncryptedSQLite, its tests and its demo need on Debian 12 (bookworm, SQLCipher 3.4.1)
# and Debian 13 (trixie, SQLCipher 4.6.1) when it is missing:
#   libsqlcipher-dev  the engine and its headers
#   libssl-dev        OpenSSL's libcrypto headers (PBKDF2, to key reader connections without a KDF each)
#   pkg-config        how SwiftPM finds them
#   sqlcipher         the independent SQLCipher shell the tests and the demo check files with
#   sqlite3           the plain SQLite shell the tests make unencrypted files with
#   util-linux        setpriv, for the tests that run rekey as an unprivileged user
#   python3-venv      for sqlcipher3-binary (below)
#   wrk, curl         the HTTP load generator and client of scripts/load-test.sh (the example service under load)
#   libp11-kit-dev    the PKCS#11 header (p11-kit's) that PKCS#11 key-encryption keys compile against
#   softhsm2, opensc  a PKCS#11 token in software and pkcs11-tool, for the PKCS#11 tests and the fleet benchmark
#   systemd           systemd-creds, for the systemd credentials test (a minimal Debian 13 root lacks it)
#   the libraries the Swift toolchain runs and links with (their names differ between Debian 12 and 13)
#   sqlcipher3-binary (PyPI, in .build/sqlcipher4-venv) an independent SQLCipher 4.12 for the interop tests
# The Swift 6 toolchain itself must already be installed (swift.org) and on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v swift >/dev/null || {
  echo "setup: the Swift 6 toolchain is not on PATH; install it from swift.org (Linux, Swift 6.0 or later)" >&2
  exit 1
}

release=$(. /etc/os-release 2>/dev/null && echo "${VERSION_ID:-}")
case "$release" in
  12) toolchain=(libcurl4 libgcc-12-dev libstdc++-12-dev) ;;
  *)  toolchain=(libcurl4t64 libgcc-14-dev libstdc++-14-dev) ;;   # Debian 13 (64-bit time_t names) and later
esac
toolchain+=(binutils git ca-certificates libc6-dev libedit2 libffi8 libncurses6 libsqlite3-0 libuuid1 libxml2 libzstd1 tzdata zlib1g)
packages=(libsqlcipher-dev libssl-dev pkg-config sqlcipher sqlite3 util-linux python3 python3-venv wrk curl libp11-kit-dev softhsm2 opensc systemd "${toolchain[@]}")
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  $sudo update-ca-certificates >/dev/null 2>&1 || true
fi
swift --version >/dev/null 2>&1 || { echo "setup: 'swift --version' fails on this machine: $(swift --version 2>&1 | tail -n 1)" >&2; exit 1; }

# An independent SQLCipher 4 (PyPI, scripts/sqlcipher4-requirements.txt: SQLCipher 4.12) for the interop
# tests, in a virtual environment under .build/, from the index this machine's pip configuration names.
# Not fatal here: without it the interop tests fail and say why (Tests/README.md: SQLCIPHER4_INTEROP_OPTIONAL).
venv=.build/sqlcipher4-venv
{ [ -x "$venv/bin/pip" ] || { mkdir -p .build && python3 -m venv "$venv"; }; } \
  && "$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/sqlcipher4-requirements.txt \
  || echo "setup: could not install sqlcipher3-binary from PyPI; the SQLCipher 4 interop tests will fail" >&2
