#!/usr/bin/env bash
# Installs what tpuctl needs to build and test, from Debian's packages only. Idempotent: when
# everything is there it only checks (a second or two). Needs root (or sudo) to install.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --bench    also the benchmark peers (OpenBLAS, oneDNN, pdsh, clush)
#   scripts/deps.sh --frameworks  also PyTorch (python3-torch, ~1 GB): the README's PyTorch recipe
#                              then runs for real in tests/integration/test_workload_frameworks.cpp
set -euo pipefail

packages=(
  # build
  g++ cmake ninja-build pkg-config git
  libcli11-dev libspdlog-dev nlohmann-json3-dev libssh-dev libcurl4-openssl-dev libsqlite3-dev
  # libcrypto's headers: remote/ssh_crypto.cpp checks host-certificate signatures with it
  libssl-dev
  # tests
  doctest-dev openssh-server openssh-client procps etcd-server etcd-client openssl
  # the fuzz smoke (bench/fuzz.sh): clang-14 is Debian 12's clang, libclang-rt-14-dev holds its
  # libFuzzer, ASan, UBSan and TSan runtimes, llvm-14 its llvm-symbolizer for readable reports
  clang libclang-rt-14-dev llvm-14
  # completion and man page tests: real shells and man
  bash-completion zsh man-db groff-base
  # the commands of Google's TPU documentation run python3 on the workers (tests/integration/
  # test_seed_commands.cpp), as a TPU VM has it
  python3-minimal
  # a preflight link blocked for real (tests/integration/test_preflight_links.cpp)
  iptables
  # packaging test (cpack's dpkg-shlibdeps)
  dpkg-dev file
)
for a in "$@"; do
  case "$a" in
    --bench) packages+=(libopenblas-dev libdnnl-dev pdsh clustershell) ;;
    --frameworks) packages+=(python3-torch) ;;
    *) echo "deps.sh: unknown option '$a' (use --bench or --frameworks)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
# Keep packages from starting their system services (sshd on :22, etcd on :2379): tpuctl's tests
# start their own servers on their own loopback ports.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee $policy >/dev/null
  $sudo chmod 755 $policy
  made_policy=1
fi
cleanup() { if [[ $made_policy -eq 1 ]]; then $sudo rm -f $policy; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "deps: done" >&2
