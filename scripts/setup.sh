#!/usr/bin/env bash
# Installs what EncryptedSQLite needs on Debian when it is missing:
#   libsqlcipher-dev  the engine (SQLCipher 3.4.1) and its headers
#   libssl-dev        OpenSSL's libcrypto headers (PBKDF2, to key reader connections without a KDF each)
#   pkg-config        how SwiftPM finds them
#   sqlcipher         the independent SQLCipher shell the tests and the demo check files with
#   sqlite3           the plain SQLite shell the tests make unencrypted files with
#   util-linux        setpriv, for the tests that run rekey as an unprivileged user
#   sqlcipher3-binary (PyPI, in .build/sqlcipher4-venv) an independent SQLCipher 4 for the interop tests
# The Swift 6 toolchain itself must already be installed (swift.org).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libsqlcipher-dev libssl-dev pkg-config sqlcipher sqlite3 util-linux)
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
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# An independent SQLCipher 4 (PyPI's sqlcipher3-binary, SQLCipher 4.12) for the interop tests, in a
# virtual environment under .build/. Not fatal: the tests install it themselves or skip saying why.
venv=.build/sqlcipher4-venv
if ! "$venv/bin/python" -c "import sqlcipher3" 2>/dev/null; then
  if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
  fi
  { mkdir -p .build && python3 -m venv "$venv" && "$venv/bin/pip" install --quiet --disable-pip-version-check sqlcipher3-binary; } \
    || echo "setup: could not install sqlcipher3-binary; the SQLCipher 4 interop tests will be skipped" >&2
fi

if ! command -v swift >/dev/null; then
  echo "setup: the Swift 6 toolchain is not on PATH; install it from swift.org (Linux, Swift 6.0 or later)" >&2
  exit 1
fi
