#!/usr/bin/env bash
# The checks of issue 34, run on a machine with JAX and a big CPU that cannot build tpuctl
# (README.md beside this file). It unpacks prepare.sh's bundle into /opt/tpuctl-remote and runs,
# in this order, each part writing its own file under OUT (default /tmp/remote-checks):
#   facts  CPU (lscpu, /proc/cpuinfo flags), OS, JAX's version, `tpuctl kernel run --isa auto
#          --format json`                                                      -> facts.txt
#   tests  the unit tests of every kernel path (tpuctl_tests, tests/unit/kernels) -> tests.txt
#   jax    the seeds' JAX program through tpuctl on local pools of 4 and 8 hosts, checked against
#          the one-process product; then jax.distributed.initialize() with no arguments under
#          each env profile                                                    -> jax.txt
#   gemm   bench/gemm_bench against OpenBLAS and oneDNN at 1 thread and all cores -> gemm.md
#   diag   (only when asked) why a kernel path fails: AMX permission, PyTorch's oneDNN ISA, the
#          faulting instruction under cuda-gdb or gdb                          -> diag.txt
#   bench/remote-checks/run.sh [--bundle FILE] [--parts facts,tests,jax,gemm] [--size N]
#                              [--reps N] [--openblas-core NAME]
# Everything it starts (sshd servers, workloads) is stopped before it returns.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
bundle=.remote-bundle/bundle.tar.xz
parts=facts,tests,jax,gemm
size=8192
reps=5
openblas_core= # OpenBLAS's own choice; name one (Cooperlake, SkylakeX) for a CPU it does not know
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bundle) bundle=${2:?}; shift ;;
    --parts) parts=${2:?}; shift ;;
    --size) size=${2:?}; shift ;;
    --reps) reps=${2:?}; shift ;;
    --openblas-core) openblas_core=${2:?}; shift ;;
    *) echo "run.sh: unknown option '$1' (use --bundle, --parts, --size, --reps or --openblas-core)" >&2; exit 2 ;;
  esac
  shift
done
out=${OUT:-/tmp/remote-checks}
mkdir -p "$out"
root=/opt/tpuctl-remote
rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xJf "$bundle" || exit 1
export PATH="$root/bin:$root/sbin:$PATH"
tpuctl=$root/bin/tpuctl
has() { [[ ",$parts," == *",$1,"* ]]; }
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
py=$(command -v python3)

if has facts; then
  {
    stamp facts
    head -1 "$root/MANIFEST"; sed -n 2p "$root/MANIFEST"
    grep PRETTY_NAME /etc/os-release; uname -r; nproc; free -g | head -2
    lscpu
    grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E 'avx512|amx|avx_vnni|vnni' | tr '\n' ' '
    echo
    "$py" -c 'import sys, jax, numpy; print("python", sys.version.split()[0], "jax", jax.__version__, "numpy", numpy.__version__)'
    "$tpuctl" version
    stamp kernel run --isa auto --format json
    "$tpuctl" kernel run --isa auto --format json
    for dtype in int8 bf16 fp32; do
      stamp "kernel run --dtype $dtype --threads $(nproc) --check"
      "$tpuctl" kernel run --dtype "$dtype" --threads "$(nproc)" --check
    done
  } >"$out/facts.txt" 2>&1
fi

if has diag; then
  # Why a kernel path fails: what Linux grants for the tile state, whether another library's
  # AMX kernels run here (PyTorch's oneDNN), and the faulting instruction under a debugger.
  {
    stamp diag
    "$py" - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, code in (("ARCH_GET_XCOMP_SUPP", 0x1021), ("ARCH_GET_XCOMP_PERM", 0x1022)):
    v = ctypes.c_ulong(0)
    rc = libc.syscall(158, code, ctypes.byref(v))
    print(f"{name}: rc {rc} errno {ctypes.get_errno()} value {v.value:#x}")
rc = libc.syscall(158, 0x1023, 18)
v = ctypes.c_ulong(0)
libc.syscall(158, 0x1022, ctypes.byref(v))
print(f"ARCH_REQ_XCOMP_PERM(18): rc {rc} errno {ctypes.get_errno()}; perm now {v.value:#x}")
PY
    grep -E '^(x86_Thread_features|x86_Thread_features_locked)' /proc/self/status
    (dmesg 2>/dev/null | grep -i -E 'xstate|fpu|amx|xfd' | head -20) || true
    stamp "PyTorch's oneDNN on a bf16 and an int8 matmul (ONEDNN_VERBOSE)"
    ONEDNN_VERBOSE=1 timeout 60 "$py" -c 'import torch; a = torch.randn(256, 256).bfloat16(); print((a @ a).float().sum())' 2>&1 | grep -E 'exec|isa|info' | head -8
    for tc in '*host_units*' '*every int8 family*' '*AMX*'; do
      stamp "tpuctl_tests -tc=$tc"
      "$root/bin/tpuctl_tests" -tc="$tc" 2>&1 | tail -n 4
    done
    if command -v cuda-gdb >/dev/null; then
      for what in "tpuctl_tests -tc=*host_units*" "tpuctl kernel run --isa auto --m 64 --n 64 --k 64"; do
        stamp "cuda-gdb: $what"
        # shellcheck disable=SC2086
        timeout 120 cuda-gdb -q -batch -ex 'set pagination off' -ex run -ex bt -ex 'x/6i $pc-16' \
          -ex 'x/3i $pc' -ex 'info registers rip' --args $root/bin/$what 2>&1 | tail -n 40
      done
    fi
  } >"$out/diag.txt" 2>&1
fi

if has tests; then
  {
    stamp unit tests of the kernels
    "$root/bin/tpuctl_tests" --source-file='*tests/unit/kernels/*' --duration=true 2>&1 | tail -n 60
    echo "exit ${PIPESTATUS[0]}"
    stamp the agent probe
    "$root/bin/tpuctl_tests" --source-file='*tests/unit/agent/test_probe*' 2>&1 | tail -n 5
  } >"$out/tests.txt" 2>&1
fi

# A local pool on loopback, a cluster, one workload; prints its logs and state.
jax_on_pool() { # hosts chip-shape tpu-type
  local hosts=$1 shape=$2 type=$3 rc
  stamp "pool local-up --hosts $hosts --shape $shape; cluster create --tpu-type $type"
  "$tpuctl" pool local-up --hosts "$hosts" --shape "$shape" --generation v5e \
    --address-base 127.0.0.2 --port 2222 || return 1
  "$tpuctl" cluster create --cluster "jax$hosts" --tpu-type "$type" || return 1
  stamp "workload create: the seeds' program, ${size}x${size}"
  "$tpuctl" workload create --cluster "jax$hosts" --workload "hello$hosts" \
    --env JAX_PLATFORMS=cpu --command "$py $repo/bench/remote-checks/jax_parallelism.py --size $size"
  "$tpuctl" workload wait "hello$hosts" --timeout 150s; rc=$?
  stamp "workload wait: exit $rc"
  "$tpuctl" workload logs "hello$hosts"
  "$tpuctl" workload list
  "$tpuctl" workload delete "hello$hosts"
  if ((hosts == 8)); then
    # jax.distributed.initialize() with no arguments, under each env profile.
    local profile
    for profile in none slurm; do
      stamp "initialize() with no arguments, --env-profile $profile"
      "$tpuctl" workload create --cluster "jax$hosts" --workload "auto-$profile" \
        --env JAX_PLATFORMS=cpu --env-profile "$profile" \
        --command "$py $repo/bench/remote-checks/jax_parallelism.py --init auto --size 1024"
      "$tpuctl" workload wait "auto-$profile" --timeout 60s
      stamp "workload wait: exit $?"
      "$tpuctl" workload logs "auto-$profile" --tail 8
      "$tpuctl" workload delete "auto-$profile"
    done
    stamp "the same with only the variables tpuctl exported before (no SLURM_JOB_ID, no step)"
    "$tpuctl" workload create --cluster "jax$hosts" --workload auto-old-slurm \
      --env JAX_PLATFORMS=cpu --env-profile slurm \
      --command "env -u SLURM_JOB_ID -u SLURM_STEP_NODELIST -u SLURM_STEP_NUM_NODES -u SLURM_STEP_NUM_TASKS -u SLURM_STEP_TASKS_PER_NODE -u SLURM_STEP_ID -u SLURM_JOB_NUM_NODES $py $repo/bench/remote-checks/jax_parallelism.py --init auto --size 1024"
    "$tpuctl" workload wait auto-old-slurm --timeout 60s
    stamp "workload wait: exit $?"
    "$tpuctl" workload logs auto-old-slurm --tail 8
    "$tpuctl" workload delete auto-old-slurm
  fi
  "$tpuctl" cluster delete "jax$hosts" --force
  "$tpuctl" pool local-down
  return "$rc"
}

if has jax; then
  {
    stamp jax
    # sshd run as root needs its privilege-separation user and folder (Debian's package makes
    # them; this machine may have no sshd at all).
    id sshd >/dev/null 2>&1 ||
      useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd ||
      echo 'sshd:x:74:65534::/run/sshd:/usr/sbin/nologin' >>/etc/passwd
    mkdir -p /run/sshd && chmod 0755 /run/sshd
    site=$("$py" -c 'import jax, os; print(os.path.dirname(jax.__file__))')
    echo "JAX at $site; what jax.distributed.initialize() reads from the environment:"
    grep -n "environ" "$site/_src/distributed.py" | head -20
    sed -n '1,200p' "$site/_src/clusters/slurm_cluster.py" | grep -v '^#' | grep -v '^$' | head -70
    state=$(mktemp -d /tmp/tpuctl-jax.XXXXXX)
    export TPUCTL_STATE="sqlite:$state/state.db" TPUCTL_POOL=jax
    jax_on_pool 4 4x4 v5litepod-16; echo "4 hosts: exit $?"
    jax_on_pool 8 4x8 v5litepod-32; echo "8 hosts: exit $?"
    "$tpuctl" pool local-down >/dev/null 2>&1
    rm -rf "$state"
  } >"$out/jax.txt" 2>&1
fi

if has gemm; then
  # As bench/run_gemm_bench.sh: the peers' threads yield quickly; OpenBLAS picks its own core;
  # oneDNN may use every ISA (its AMX kernels included).
  threads=1,$(nproc)
  stamp "gemm_bench --targets --reps $reps --threads $threads" >"$out/gemm.err"
  core=(-u OPENBLAS_CORETYPE)
  [[ -n $openblas_core ]] && core=(OPENBLAS_CORETYPE="$openblas_core")
  env -u OPENBLAS_L2_SIZE "${core[@]}" OPENBLAS_THREAD_TIMEOUT=20 GOMP_SPINCOUNT=3000 \
    ONEDNN_MAX_CPU_ISA=ALL OPENBLAS_VERBOSE=2 \
    timeout 170 "$root/bin/gemm_bench" --targets --reps "$reps" --threads "$threads" >"$out/gemm.md" 2>>"$out/gemm.err"
  echo "exit $?" >>"$out/gemm.err"
fi
for f in facts tests jax; do [[ -f $out/$f.txt ]] && tail -n 3 "$out/$f.txt"; done
exit 0
