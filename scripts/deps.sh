#!/usr/bin/env bash
# Installs what tpuctl needs to build and test, from Debian's packages only. Idempotent: when
# everything is there it only checks (a second or two). Needs root (or sudo) to install.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --bench    also the benchmark peers (OpenBLAS, oneDNN, pdsh, clush)
#   scripts/deps.sh --frameworks  also the frameworks users run on the workers: Debian's PyTorch
#                              (python3-torch) and, from PyPI, JAX, Orbax and optax pinned in
#                              scripts/frameworks-requirements.txt, in the project's own Python
#                              environment $TPUCTL_FRAMEWORKS_DIR (default /opt/tpuctl/frameworks,
#                              the one tpuctl puts on the workers' PATH), never the system's
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
  # network namespaces (ip netns: the jump-host site, OpenSSH on port 22, the suite's second
  # copy under load) and ss
  iproute2
  # packaging test (cpack's dpkg-shlibdeps)
  dpkg-dev file
)
frameworks=0
for a in "$@"; do
  case "$a" in
    --bench) packages+=(libopenblas-dev libdnnl-dev pdsh clustershell) ;;
    --frameworks) packages+=(python3-torch python3-venv); frameworks=1 ;;
    *) echo "deps.sh: unknown option '$a' (use --bench or --frameworks)" >&2; exit 2 ;;
  esac
done

sudo=""
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then
  sudo="sudo"
fi

# The project's Python environments: virtual environments of Debian's python3 (the one the
# workers run), each holding exactly its pinned set, made again only when the pins change:
# $1 the directory, $2 the requirements file, $3 what it is for (messages).
install_venv() {
  local dir=$1 reqs=$2 what=$3
  local want
  want=$(sha256sum "$reqs" | cut -d' ' -f1)
  if [[ -x $dir/bin/python3 && "$(cat "$dir/.tpuctl-requirements" 2>/dev/null)" == "$want" ]]; then
    return 0
  fi
  if [[ -e $dir && -n "$(ls -A "$dir" 2>/dev/null)" && ! -f $dir/pyvenv.cfg ]]; then
    echo "deps: $dir holds files but no virtual environment: not replacing it (set TPUCTL_FRAMEWORKS_DIR or TPUCTL_XPK_DIR to an empty or new directory)" >&2
    exit 1
  fi
  echo "deps: installing $what into $dir ($(basename "$reqs"))" >&2
  as=""
  if ! mkdir -p "$dir" 2>/dev/null || [[ ! -w $dir ]]; then
    [[ -n $sudo ]] || { echo "deps: cannot write $dir: run as root or with sudo, or set TPUCTL_FRAMEWORKS_DIR / TPUCTL_XPK_DIR" >&2; exit 1; }
    as=$sudo
    $as mkdir -p "$dir"
  fi
  # Made afresh in place (a virtual environment knows its own path); the stamp is written last,
  # so an interrupted install is redone by the next run.
  $as rm -rf "$dir"
  $as /usr/bin/python3 -m venv "$dir"
  if ! $as "$dir/bin/python3" -m pip install --quiet --disable-pip-version-check --no-input \
      --requirement "$reqs" >&2; then
    $as rm -rf "$dir"
    echo "deps: pip could not install scripts/$(basename "$reqs") from PyPI" >&2
    exit 1
  fi
  $as "$dir/bin/python3" -m pip check --disable-pip-version-check >&2
  return 1 # made now: the caller finishes it, then stamps it
}

stamp_venv() {
  sha256sum "$2" | cut -d' ' -f1 | $as tee "$1/.tpuctl-requirements" >/dev/null
}

install_frameworks() {
  local here
  here="$(cd "$(dirname "$0")" && pwd)"
  local dir=${TPUCTL_FRAMEWORKS_DIR:-/opt/tpuctl/frameworks}
  local as=""
  if ! install_venv "$dir" "$here/frameworks-requirements.txt" "JAX, Orbax and optax"; then
    stamp_venv "$dir" "$here/frameworks-requirements.txt"
    echo "deps: $("$dir/bin/python3" -c 'import jax, orbax.checkpoint, optax; print("jax", jax.__version__, "orbax-checkpoint", orbax.checkpoint.__version__, "optax", optax.__version__)') in $dir" >&2
  fi
  # xpk, for its parser and its documentation (the sdist's docs/, README.md and recipes/).
  local xdir=${TPUCTL_XPK_DIR:-/opt/tpuctl/xpk}
  if ! install_venv "$xdir" "$here/xpk-requirements.txt" "xpk (its parser and docs, the oracle of tpuctl's xpk surface)"; then
    local version tmp
    version=$(sed -n 's/^xpk==//p' "$here/xpk-requirements.txt")
    tmp=$(mktemp -d)
    if ! "$xdir/bin/python3" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary :all: "xpk==$version" -d "$tmp" >&2; then
      rm -rf "$tmp"
      $as rm -rf "$xdir"
      echo "deps: pip could not download xpk $version's source (its documentation) from PyPI" >&2
      exit 1
    fi
    $as mkdir -p "$xdir/docs"
    $as tar -xzf "$tmp"/xpk-"$version".tar.gz -C "$xdir/docs" --strip-components=1 \
      --wildcards "xpk-$version/README.md" "xpk-$version/docs/*" "xpk-$version/recipes/*"
    rm -rf "$tmp"
    stamp_venv "$xdir" "$here/xpk-requirements.txt"
    echo "deps: xpk $version and its documentation in $xdir" >&2
  fi
}

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  [[ $frameworks -eq 1 ]] && install_frameworks
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 && -z $sudo ]]; then
  echo "deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
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
[[ $frameworks -eq 1 ]] && install_frameworks
exit 0
