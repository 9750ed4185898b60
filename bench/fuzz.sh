#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan, in build-fuzz/) and runs each one
# for SECONDS with its seed corpus (fuzz/corpus/<target>/) and its fixed crashes
# (fuzz/regressions/<target>/, always replayed first). New interesting inputs and any crash go to
# a scratch directory, never into the repository: copy a crash into fuzz/regressions/<target>/
# once it is fixed.
#   bench/fuzz.sh [SECONDS] [TARGET...]   default: 60 s each, every target (names without fuzz_)
#   bench/fuzz.sh 0                       replay the corpora and regressions only
#   bench/fuzz.sh --runs N [TARGET...]    replay them, then N new inputs per target (the smoke of
#                                         scripts/test.sh: seconds in all, whatever the machine)
# Environment: FUZZ_BUILD_DIR (build-fuzz), FUZZ_SCRATCH (build-fuzz/scratch), FUZZ_JOBS (build
# parallelism, 2), FUZZ_SEED (the --runs smoke's seed, 1). Exit status: 0 when every target ran
# clean, 1 on a finding (its log is printed).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.." # the checkout, also when run through a link
runs=""
if [[ "${1:-}" == "--runs" ]]; then
  runs=${2:-}
  shift 2 || true
  if ! [[ "$runs" =~ ^[0-9]+$ ]]; then
    echo "fuzz.sh: --runs needs a whole number, not '$runs'" >&2
    exit 2
  fi
  seconds=0
else
  seconds=${1:-60}
  [[ $# -gt 0 ]] && shift
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2
  exit 2
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in fuzz/fuzz_*.cpp; do
    t=$(basename "$f" .cpp)
    targets+=("${t#fuzz_}")
  done
fi
for t in "${targets[@]}"; do
  if [[ ! -f fuzz/fuzz_$t.cpp ]]; then
    echo "fuzz.sh: no target '$t' (fuzz/fuzz_$t.cpp); targets: $(ls fuzz/fuzz_*.cpp | sed 's|fuzz/fuzz_||; s|\.cpp||' | tr '\n' ' ')" >&2
    exit 2
  fi
done
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ (scripts/deps.sh installs clang)" >&2; exit 2; }

build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
scratch=${FUZZ_SCRATCH:-$build_dir/scratch}
generator=()
command -v ninja >/dev/null && [[ ! -f "$build_dir/CMakeCache.txt" ]] && generator=(-G Ninja)
# -O1 and line tables only: the libraries build about twice as fast as with full debug info, and
# sanitizer reports still name files and lines.
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DTPUCTL_BUILD_FUZZ=ON -DTPUCTL_BUILD_TESTS=OFF >/dev/null
build_start=$SECONDS
cmake --build "$build_dir" -j"${FUZZ_JOBS:-2}" --target "${targets[@]/#/fuzz_}" >"$build_dir/fuzz-build.log" 2>&1 ||
  { tail -n 40 "$build_dir/fuzz-build.log" >&2; exit 2; }
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - build_start)) s"

symbolizer=$(command -v llvm-symbolizer || ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | head -n 1 || true)
[[ -n "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

failed=()
for t in "${targets[@]}"; do
  bin="$build_dir/fuzz/fuzz_$t"
  mkdir -p "$scratch/corpus/$t" "$scratch/artifacts/$t"
  dirs=("$scratch/corpus/$t")
  for d in "fuzz/corpus/$t" "fuzz/regressions/$t"; do
    [[ -d $d ]] && dirs+=("$d")
  done
  log="$scratch/$t.log"
  : >"$log"
  start=$SECONDS
  # The regressions first, one run each: a fixed crash that comes back is named by its file.
  status=0
  if compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    "$bin" -runs=1 "fuzz/regressions/$t"/* >>"$log" 2>&1 || status=$?
  fi
  if [[ $status -eq 0 ]]; then
    limits=(-max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
            -artifact_prefix="$scratch/artifacts/$t/")
    if [[ -n $runs ]]; then
      # -runs counts the corpus replay too: replay it all, then $runs new inputs. The smoke is a
      # test, so its new inputs are the same on every run (FUZZ_SEED, 1): finding bugs by chance
      # is the timed mode's job, and what it finds becomes a file in fuzz/regressions/.
      corpus_files=$(find "${dirs[@]}" -type f | wc -l)
      "$bin" "${limits[@]}" -seed="${FUZZ_SEED:-1}" -runs=$((corpus_files + runs)) "${dirs[@]}" \
        >>"$log" 2>&1 || status=$?
    elif [[ $seconds -eq 0 ]]; then
      "$bin" "${limits[@]}" -runs=0 "${dirs[@]}" >>"$log" 2>&1 || status=$?
    else
      "$bin" "${limits[@]}" -max_total_time="$seconds" "${dirs[@]}" >>"$log" 2>&1 || status=$?
    fi
  fi
  executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1 || true)
  corpus=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -n 1 || true)
  if [[ $status -ne 0 ]]; then
    failed+=("$t")
    echo "fuzz: $t FAILED after $((SECONDS - start)) s (log: $log, inputs: $scratch/artifacts/$t/)"
    # The finding, then only the stack frames in tpuctl's own code (libFuzzer's and the
    # standard library's are in the log).
    grep -E 'ERROR: |property failed|runtime error|SUMMARY|^  |/work/|tpuctl::|LLVMFuzzerTestOneInput|^MS:|^0x|^artifact' "$log" |
      grep -v -E 'fuzzer::|libc|_start' | cut -c1-240 | head -n 40 >&2 || tail -n 40 "$log" >&2
  else
    echo "fuzz: $t ok, ${executed:-0} runs in $((SECONDS - start)) s (${corpus:-corp: ?})"
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ok"
