#!/usr/bin/env bash
# The test suite as a shared CI machine runs it: --runs times back to back, each time with a
# second copy of the whole suite loading the machine at the same moment. The second copy runs in
# a network namespace of its own (unshare -n: its loopback is its own, so both copies use the
# same addresses, as two CI jobs in two containers do); they share the CPUs, the disk and the
# process table. A test that fails here on a healthy product is a defect of the test.
#
#   bench/suite_under_load.sh [--runs N] [-- CTEST_ARGS...]
#
# Uses the build in ${BUILD_DIR:-build} (run scripts/test.sh or scripts/build.sh first). Needs
# root (unshare -n) and iproute2. Prints each run's ctest summary (the measured copy's and the
# load's) and, for a failed run, the failing tests; exits 1 when a measured run failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." # the checkout, also when run through a link
runs=3
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "suite_under_load.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[0-9]+$ && $runs -ge 1 ]] || { echo "suite_under_load.sh: --runs must be >= 1" >&2; exit 2; }
build=${BUILD_DIR:-build}
[[ -x $build/tests/tpuctl_tests ]] || { echo "suite_under_load.sh: no $build/tests/tpuctl_tests: build first (scripts/build.sh)" >&2; exit 2; }
logs=$(mktemp -d /tmp/tpuctl-suite-load-XXXXXX)
load_pid=
cleanup() {
  [[ -n $load_pid ]] && kill -- "-$load_pid" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=0
for run in $(seq "$runs"); do
  # The load: the same suite, its own loopback, its own process group (stopped by it on exit).
  setsid unshare -n sh -c 'ip link set lo up && exec ctest --test-dir "$1" -j"$(nproc)" --output-on-failure' sh \
    "$build" >"$logs/load-$run.log" 2>&1 &
  load_pid=$!
  start=$SECONDS
  rc=0
  ctest --test-dir "$build" -j"$(nproc)" --output-on-failure "${extra[@]}" >"$logs/run-$run.log" 2>&1 || rc=$?
  took=$((SECONDS - start))
  wait "$load_pid" || true
  load_pid=
  echo "run $run ($took s): $(grep -E 'tests passed' "$logs/run-$run.log" || echo 'no summary')" \
    "| load: $(grep -E 'tests passed' "$logs/load-$run.log" || echo 'no summary')"
  if [[ $rc != 0 ]]; then
    failed=$((failed + 1))
    sed -n '/The following tests FAILED/,$p' "$logs/run-$run.log"
  fi
done
echo "$((runs - failed)) of $runs runs passed under load (logs: $logs)"
[[ $failed == 0 ]]
