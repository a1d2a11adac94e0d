# Sourced by scripts/sqlcipher4-check.sh and scripts/sqlcipher4-bench.sh: makes (once) and enters a
# fresh Debian 13 (trixie, SQLCipher 4.6.1) root, with this machine's Swift toolchain and Swift
# package mirror bind-mounted read-only and a clone of this repository's HEAD in it at
# /root/encryptedsqlite, whose .build stays between runs. scripts/setup.sh installs the packages there
# as on any Debian 13 machine. Needs root (debootstrap, chroot, mount; with sudo otherwise).
# The root goes to $SQLCIPHER4_ROOT, by default .build-sqlcipher4/root in this repository (about
# 0.7 GB, ignored by git). Its Debian mirror is the one this machine's apt configuration names; pip
# inside it uses this machine's pip configuration and certificates. The sourcing script runs again in
# a private mount namespace: the mounts vanish when it ends, however it ends.
# After sourcing: $root is the root, $clone the clone in it (seen from here); run commands in the
# clone with sqlcipher4_run 'COMMANDS'.
repo=$(pwd)
root=${SQLCIPHER4_ROOT:-$repo/.build-sqlcipher4/root}

if [ "$(id -u)" -ne 0 ]; then
  echo "$(basename "$0"): SQLCipher 4 runs in a Debian 13 root, which needs root to make (debootstrap) and use" >&2
  echo "(chroot, mount). Run it as root or with sudo: sudo scripts/$(basename "$0") $*" >&2
  exit 1
fi
if [ -z "${SQLCIPHER4_NAMESPACE:-}" ]; then
  command -v unshare >/dev/null || { echo "$(basename "$0"): needs unshare (util-linux)" >&2; exit 1; }
  SQLCIPHER4_NAMESPACE=1 exec unshare --mount --propagation private "$repo/scripts/$(basename "$0")" "$@"
fi
swift_root=$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")   # …/usr/bin/swift → toolchain root

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  # The Debian mirror this machine's own apt configuration uses (no host name is written here).
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' 'Created-By: Packages' 2>/dev/null \
    | awk '$2 !~ /-(security|updates|backports)$/ { print $1; exit }')
  [ -n "$mirror" ] || { echo "sqlcipher4-root: no Debian mirror found in this machine's apt configuration" >&2; exit 1; }
  echo "== debootstrap trixie into $root"
  start=$(date +%s)
  rm -rf "$root.partial" && mkdir -p "$(dirname "$root")"
  log=$(mktemp)
  debootstrap --variant=minbase trixie "$root.partial" "$mirror" > "$log" 2>&1 || { tail -n 20 "$log" >&2; exit 1; }
  rm -f "$log"
  mv "$root.partial" "$root"
  echo "== debootstrap: $(( $(date +%s) - start )) s"
fi

bind() {  # bind <host path> <path inside the root> [ro]
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  [ "${3:-}" = ro ] && mount -o remount,bind,ro "$root$2"
  return 0
}
mount -t proc proc "$root/proc"
bind /dev /dev
bind /dev/pts /dev/pts
bind "$swift_root" /opt/swift ro
[ -d /opt/swift-packages ] && bind /opt/swift-packages /opt/swift-packages ro
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's local certificate authorities (a proxy's, a company's) and pip settings, so that pip
# inside the root reaches PyPI the way it does here (the SQLCipher 4 interop tests install from it).
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
[ -d /opt/swift-packages ] && printf '[url "/opt/swift-packages/"]\n\tinsteadOf = https://github.com/\n' > "$root/etc/gitconfig"

# A clone inside the root, brought to HEAD; its .build stays between runs (untracked files go), so a
# second run rebuilds only what changed.
clone="$root/root/encryptedsqlite"
[ -d "$clone/.git" ] || git clone -q "$repo" "$clone"
git -C "$clone" fetch -q "$repo" HEAD
git -C "$clone" reset -q --hard FETCH_HEAD
git -C "$clone" clean -q -fdx -e .build

# Runs shell commands in the clone inside the root, with the toolchain on PATH.
sqlcipher4_run() {
  chroot "$root" /usr/bin/env -u SQLCIPHER4_NAMESPACE PATH=/opt/swift/usr/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    /bin/bash -c "cd /root/encryptedsqlite && $1"
}

echo "== Debian 13 root: scripts/setup.sh"
start=$(date +%s)
sqlcipher4_run "scripts/setup.sh"
echo "== setup: $(( $(date +%s) - start )) s; $(chroot "$root" sqlcipher -version | sed 's/.*(\(SQLCipher [^)]*\)).*/\1/')"
