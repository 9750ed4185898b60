#!/usr/bin/env bash
# The main job, from a fresh machine: installs dependencies, builds tpuctl, then walks through
# what it does on a local pool of real sshd servers. Everything it creates lives in a scratch
# state directory that is torn down at the end (also on Ctrl-C). Safe to rerun.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." # the checkout, also when run through a link
if [[ -n ${TPUCTL_DEMO_BIN:-} ]]; then
  # A tpuctl already built (the README's test gives the one under test: rebuilding the binary
  # other tests are running would pull it from under them).
  [[ -x $TPUCTL_DEMO_BIN ]] || { echo "demo: TPUCTL_DEMO_BIN '$TPUCTL_DEMO_BIN' is not an executable" >&2; exit 2; }
  tpuctl=$TPUCTL_DEMO_BIN
else
  scripts/deps.sh
  build_dir=$(scripts/build.sh --target tpuctl | tail -n 1) # the demo runs no test: only tpuctl
  tpuctl="$(pwd)/$build_dir/cli/tpuctl"
fi
# The local pool's loopback block: 127.0.0.2-9 unless TPUCTL_DEMO_NET says another /24's first
# three octets (the README's test runs the demo beside other tests, each on its own block).
net=${TPUCTL_DEMO_NET:-127.0.0}
[[ $net =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || { echo "demo: TPUCTL_DEMO_NET '$net' is not 127.X.Y" >&2; exit 2; }

demo=$(mktemp -d /tmp/tpuctl-demo.XXXXXX)
export TPUCTL_STATE="sqlite:$demo/state.db"
export TPUCTL_POOL=demo
cleanup() {
  "$tpuctl" pool local-down >/dev/null 2>&1 || true
  rm -rf "$demo"
}
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*" | sed "s|$tpuctl|tpuctl|g"; "$@"; }

echo "== TPU topology: what a slice is"
step "$tpuctl" topology describe v5litepod-16
step "$tpuctl" topology mesh v5litepod-16 --shape 4,4 --axes data,model

echo
echo "== The systolic kernel: an MXU cycle model (SCALE-Sim v2 exact)"
step "$tpuctl" kernel simulate --conv 224,224,11,11,3,96,4 --array 32x32

echo
echo "== A local pool: 8 real sshd hosts of 4 chips (an 8x4-chip v5e pool) on $net.x"
step "$tpuctl" pool local-up --hosts 8 --generation v5e --address-base "$net.2" --port 2222
step "$tpuctl" pool check

echo
echo "== A cluster (xpk's 'cluster create'): a v5litepod-16 slice, queued, placed, provisioned"
step "$tpuctl" cluster create --cluster demo --tpu-type v5litepod-16
step "$tpuctl" env demo --worker 1

echo
echo "== --worker=all: the same program on every worker, each with its own TPU_WORKER_ID"
step "$tpuctl" ssh demo --worker=all --command 'echo "worker $TPU_WORKER_ID of $TPU_WORKER_HOSTNAMES, coordinator $JAX_COORDINATOR_ADDRESS"'

echo
echo "== A workload: the SPMD matmul on all 4 workers at once (ring all-gather over TCP)"
step "$tpuctl" workload create --cluster demo --workload matmul \
  --command 'tpuctl agent spmd-matmul --m 1024 --n 1024 --k 1024 --dtype int8 --timeout 60s'
step "$tpuctl" workload wait matmul --timeout 5m
step "$tpuctl" workload logs matmul
step "$tpuctl" workload list

echo
echo "== Drain a free host; the grid shows it"
step "$tpuctl" pool drain "$net.8" --reason "demo: bad disk"
step "$tpuctl" pool describe

echo
echo "== Delete everything the cluster holds: workloads, slices, host claims"
step "$tpuctl" cluster delete demo --force

echo
echo "== Tear down"
step "$tpuctl" pool local-down
trap - EXIT
rm -rf "$demo"
