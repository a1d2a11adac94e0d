# Sourced by scripts/sqlcipher4-check.sh and scripts/sqlcipher4-bench.sh: makes (once) and enters
# a Debian trixie root with SQLCipher 4 (libsqlcipher-dev 4.6.x and its sqlcipher shell), this
# machine's Swift toolchain and Swift package mirror bind-mounted (unmounted when the sourcing
# script exits), and a clone of this repository's HEAD in it at /root/encryptedsqlite whose
# .build stays between runs. Needs root (debootstrap, chroot, mount) and Debian's package servers.
# Set SQLCIPHER4_ROOT to choose where the root goes (default: ../sqlcipher4-root).
# After sourcing: $root is the root; run commands in it with sqlcipher4_run 'COMMANDS'.
repo=$(pwd)
root=${SQLCIPHER4_ROOT:-$(dirname "$repo")/sqlcipher4-root}
swift_root=$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")   # …/usr/bin/swift → toolchain root

[ "$(id -u)" -eq 0 ] || { echo "sqlcipher4-root: needs root (debootstrap, chroot, mount)" >&2; exit 1; }
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }

if [ ! -x "$root/usr/bin/apt-get" ]; then
  # The Debian mirror this machine's own apt configuration uses (no host name is written here).
  mirror=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' 'Created-By: Packages' 2>/dev/null \
    | awk '$2 !~ /-(security|updates|backports)$/ { print $1; exit }')
  [ -n "$mirror" ] || { echo "sqlcipher4-root: no Debian mirror found in this machine's apt configuration" >&2; exit 1; }
  echo "== debootstrap trixie into $root from $mirror"
  debootstrap --variant=minbase trixie "$root" "$mirror" >/dev/null
fi

mounted=()
bind() {  # bind <host path> <path inside the root>
  mkdir -p "$root$2"
  mountpoint -q "$root$2" || { mount --bind "$1" "$root$2"; mounted+=("$root$2"); }
}
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" || true; done; }
trap cleanup EXIT
mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc"; mounted+=("$root/proc"); }
bind /dev /dev
bind /dev/pts /dev/pts
bind "$swift_root" /opt/swift
[ -d /opt/swift-packages ] && bind /opt/swift-packages /opt/swift-packages
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's local certificate authorities (a proxy's, a company's) and pip settings, so that pip
# inside the root reaches PyPI the way it does here (the SQLCipher 4 interop tests install from it).
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
[ -d /opt/swift-packages ] && printf '[url "/opt/swift-packages/"]\n\tinsteadOf = https://github.com/\n' > "$root/etc/gitconfig"

echo "== packages: SQLCipher 4, the shells the tests use, the toolchain's runtime libraries"
chroot "$root" /bin/bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  libsqlcipher-dev sqlcipher sqlite3 pkg-config libssl-dev libcurl4t64 libxml2 libsqlite3-0 libncurses6 libffi8 libstdc++6 \
  zlib1g libuuid1 libzstd1 libedit2 libc6-dev libgcc-14-dev libstdc++-14-dev binutils git ca-certificates python3 python3-venv \
  util-linux bsdutils tzdata >/dev/null && update-ca-certificates >/dev/null'
chroot "$root" sqlcipher -version

# A clone inside the root, brought to HEAD; its .build stays between runs (untracked files go), so a
# second run rebuilds only what changed.
clone="$root/root/encryptedsqlite"
[ -d "$clone/.git" ] || git clone -q "$repo" "$clone"
git -C "$clone" fetch -q "$repo" HEAD
git -C "$clone" reset -q --hard FETCH_HEAD
git -C "$clone" clean -q -fdx -e .build

# Runs shell commands in the clone inside the root, with the toolchain on PATH.
sqlcipher4_run() {
  chroot "$root" /bin/bash -c "export PATH=/opt/swift/usr/bin:\$PATH HOME=/root; cd /root/encryptedsqlite && $1"
}
