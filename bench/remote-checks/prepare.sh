#!/usr/bin/env bash
# Prepares, on a Debian 12 development machine, everything the checks of a machine that cannot
# build tpuctl need (README.md beside this file): tpuctl, its test binary and the GEMM benchmark
# (with OpenBLAS and oneDNN, the benchmark's peers), OpenSSH's server and ssh-keygen from their
# Debian packages (`apt-get download`, `dpkg -x`), and every shared library they load that is not
# glibc's (`ldd`), in one xz tarball:
#   bench/remote-checks/prepare.sh [--out DIR]     (default DIR: .remote-bundle, git-ignored)
# Every ELF file's RPATH is set to the fixed folder run.sh unpacks into (/opt/tpuctl-remote/lib):
# the agent that tpuctl pushes to a local pool's workers starts under sshd, which passes no
# LD_LIBRARY_PATH, so the libraries must be found from the binary itself. A DT_RPATH (not
# RUNPATH) also covers the libraries' own dependencies. Debug info is stripped.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.remote-bundle
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?--out needs a folder}; shift ;;
    *) echo "prepare.sh: unknown option '$1' (use --out DIR)" >&2; exit 2 ;;
  esac
  shift
done
readonly remote_root=/opt/tpuctl-remote

scripts/deps.sh --bench >&2
command -v patchelf >/dev/null || apt-get install -y -q patchelf >&2
build=$(scripts/build.sh --target tpuctl --target tpuctl_tests | tail -n 1)
bench=$(BUILD_DIR=build-bench scripts/build.sh --bench --target gemm_bench | tail -n 1)

stage=$(mktemp -d /tmp/tpuctl-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/sbin" "$stage/lib" "$stage/debs"
cp "$build/cli/tpuctl" "$build/tests/tpuctl_tests" "$bench/bench/gemm_bench" "$stage/bin/"

# OpenSSH's server, client tools and sftp-server, as Debian ships them.
(cd "$stage/debs" && apt-get download openssh-server openssh-client openssh-sftp-server >&2)
for deb in "$stage"/debs/*.deb; do dpkg -x "$deb" "$stage/debs/root"; done
cp "$stage/debs/root/usr/sbin/sshd" "$stage/sbin/"
cp "$stage/debs/root/usr/bin/ssh-keygen" "$stage/debs/root/usr/bin/ssh-keyscan" "$stage/bin/"
cp "$stage/debs/root/usr/lib/openssh/sftp-server" "$stage/sbin/"
rm -rf "$stage/debs"

# glibc's own libraries come from the machine (they must match its ld.so); everything else
# travels (libnsl.so.2 and libcrypt are not glibc's in Debian 12). libstdc++ and libgcc_s
# travel too: the machine may have older ones.
is_glibc() {
  case "$(basename "$1")" in
    ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|\
    libanl.so.1|libnss_*|libBrokenLocale*|libthread_db*|libmvec.so*) return 0 ;;
  esac
  return 1
}
elves=("$stage"/bin/* "$stage"/sbin/*)
# tpuctl loads libssh, libcurl and libcrypto on first use (dlopen: remote/libssh_lazy.cpp,
# state/curl_api.cpp, remote/ssh_crypto.cpp), so ldd does not list them: they travel by name.
lazy=()
for name in libssh.so.4 libcurl.so.4 libcrypto.so.3; do
  path=$(ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ && !f {print $NF; f = 1}')
  [[ -n $path ]] || { echo "prepare.sh: $name is not installed (scripts/deps.sh)" >&2; exit 1; }
  lazy+=("$path")
done
for elf in "${elves[@]}" "${lazy[@]}"; do
  for lib in $(ldd "$elf" | awk '/=> \//{print $3}') "$elf"; do
    [[ $lib == "$stage"/* ]] || is_glibc "$lib" || cp -nL "$lib" "$stage/lib/"
  done
done
strip --strip-debug "${elves[@]}" "$stage"/lib/*
for elf in "${elves[@]}"; do
  patchelf --force-rpath --set-rpath "$remote_root/lib" "$elf"
done
# sshd must not be group- or world-writable, nor its folders (StrictModes-like checks of exec).
chmod 0755 "$stage"/bin/* "$stage"/sbin/*

{
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), $(uname -m)"
  echo "tpuctl $(git describe --always --dirty)"
  echo "remote root: $remote_root"
  (cd "$stage" && find . -type f -printf '%p %s\n' | sort)
} >"$stage/MANIFEST"

mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" .
size=$(stat -c %s "$out/bundle.tar.xz")
echo "prepare.sh: $out/bundle.tar.xz, $((size / 1048576)) MiB ($(wc -l <"$stage/MANIFEST") lines of MANIFEST)" >&2
if ((size > 60 * 1048576)); then
  echo "prepare.sh: the bundle is over 60 MiB: it would not travel with the tree (64 MiB in all)" >&2
  exit 1
fi
echo "$out/bundle.tar.xz"
