#!/usr/bin/env bash
# Builds the libFuzzer targets (Fuzz/Package.swift) and runs each for a while.
#   scripts/fuzz.sh [SECONDS] [TARGET...]        (make fuzz: FUZZ_SECONDS, default 60)
# Environment: FUZZ_PARALLEL (targets run at once, default 2), FUZZ_CONFIG (release|debug).
# Seeds: Fuzz/Corpus/<target>/ (in git). Working corpus: .build/fuzz-corpus/<target>/, crashing
# inputs: .build/fuzz-artifacts/<target>/, logs: .build/fuzz-logs/<target>.log (none in git).
# Exits non-zero if any target crashed (or failed an invariant), naming the saved input.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"; shift || true
all=(request-head response-head chunked json advice path form config cbor webauthn-outcome)
targets=("$@"); [ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
parallel="${FUZZ_PARALLEL:-2}"
config="${FUZZ_CONFIG:-release}"
flags=(-c "$config" -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)
# The run-time exclusivity checks stay on in what is fuzzed (Package.swift turns them off for
# the release build of the per-request layers).
export TXGATE_EXCLUSIVITY_CHECKS=1

start=$(date +%s)
# ld.gold warns once per exported ASan symbol; those lines say nothing.
mkdir -p .build
swift build --package-path Fuzz "${flags[@]}" >.build/fuzz-build.log 2>&1
status=$?
grep -v "ld.gold: warning: Cannot export local symbol" .build/fuzz-build.log | tail -40
[ "$status" -eq 0 ] || { echo "fuzz: build failed (full log .build/fuzz-build.log)" >&2; exit 2; }
bin="$(swift build --package-path Fuzz "${flags[@]}" --show-bin-path)"
for t in "${targets[@]}"; do
  [ -x "$bin/fuzz-$t" ] || { echo "fuzz: build failed (no $bin/fuzz-$t)" >&2; exit 2; }
done
echo "fuzz: built in $(( $(date +%s) - start )) s; running ${#targets[@]} target(s) for ${seconds} s each, ${parallel} at a time"

run() {
  local t="$1"
  local corpus=".build/fuzz-corpus/$t" artifacts=".build/fuzz-artifacts/$t/" log=".build/fuzz-logs/$t.log"
  mkdir -p "$corpus" "$artifacts" .build/fuzz-logs
  # SWIFT_BACKTRACE off: the Swift backtracer would otherwise sit on a crashed process.
  SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" \
    timeout -k 10 $(( seconds + 120 )) "$bin/fuzz-$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" "Fuzz/Corpus/$t" >"$log" 2>&1
  echo $? >".build/fuzz-logs/$t.rc"
}

running=0
for t in "${targets[@]}"; do
  run "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n; running=$((running - 1)); fi
done
wait

failed=0
printf '%-14s %8s %10s %8s %8s  %s\n' target result "exec/s" cov corpus runs
for t in "${targets[@]}"; do
  log=".build/fuzz-logs/$t.log"; rc=$(cat ".build/fuzz-logs/$t.rc" 2>/dev/null || echo 99)
  execs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')   # libFuzzer's, after reduction
  result=ok; [ "$rc" -ne 0 ] && { result="FAILED($rc)"; failed=1; }
  printf '%-14s %8s %10s %8s %8s  %s\n' "$t" "$result" "${execs:-?}" "${cov:-?}" "$corpus" "${runs:-?}"
done
if [ "$failed" -ne 0 ]; then
  for t in "${targets[@]}"; do
    [ "$(cat ".build/fuzz-logs/$t.rc" 2>/dev/null || echo 99)" -eq 0 ] && continue
    echo "--- $t (log .build/fuzz-logs/$t.log):" >&2
    grep -E "invariant:|Fatal error|ERROR: |SUMMARY|Test unit written to|Base64:" ".build/fuzz-logs/$t.log" | head -8 >&2
  done
  exit 1
fi
