#!/usr/bin/env bash
# The test suite under ThreadSanitizer: the package built with `--sanitize=thread` in a build
# folder of its own (.build/tsan, so the normal build stays), the tests run against it (the
# spawned gateways are the instrumented txgate), every process's reports collected, and the
# data races printed, grouped by the places of the two accesses.
#
#   scripts/tsan.sh [FILTER]        (make tsan; FILTER: `swift test --filter`'s, e.g. EventHTTPTests)
#
# Not reported: races between two accesses that are both inside a `Mutex.withLock` closure.
# `Synchronization.Mutex` locks with futex calls that ThreadSanitizer does not intercept on
# Linux, so it takes every access under one for a race (Swift 6.3: two threads updating a
# `Mutex<[String: Int]>` are reported); an access under a lock that races with one outside it
# is still reported, and so is any other kind of report. Skipped: three tests that measure what
# the sanitizer changes (its own allocator instead of mimalloc, the resident memory, and a lent
# header buffer parsed into in place, which the instrumented build copies instead). A report does not change a process's exit status
# (`exitcode=0`, so that the tests of the gateway's own stay valid). Exits 1 if a report is
# left or a test failed, 2 if the build failed. About 3 min to build and 5 to run on 2 cores.
# Reports: .build/tsan-reports/ (kept until the next run).
set -uo pipefail
cd "$(dirname "$0")/.."

scratch=.build/tsan
reports="$PWD/.build/tsan-reports"
flags=(--scratch-path "$scratch" --sanitize=thread)
skip='HTTPParserTests/aLentSpareIsParsedIntoAndKeepsNothing|OperationsTests/versionInLogAndHealth|SlowRequestTests/stalledBodiesAreReleased'

mkdir -p .build   # for the logs, before the first build of a fresh clone makes it
swift build "${flags[@]}" --build-tests >.build/tsan-build.log 2>&1 || {
  tail -40 .build/tsan-build.log; echo "tsan: build failed (full log .build/tsan-build.log)" >&2; exit 2; }
bin="$(swift build "${flags[@]}" --show-bin-path)"
rm -rf "$reports"; mkdir -p "$reports"
filter=(); [ $# -gt 0 ] && filter=(--filter "$1")
TSAN_OPTIONS="log_path=$reports/report halt_on_error=0 exitcode=0" TXGATE_BIN_DIR="$bin" \
  SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$(nproc)" \
  swift test "${flags[@]}" --skip-build --skip "$skip" "${filter[@]}" >.build/tsan-test.log 2>&1
tests=$?
grep -E '^(✘|✔ Test run|Test Suite .* (passed|failed))' .build/tsan-test.log | grep -v 'recorded an issue' | tail -20

python3 - "$reports" <<'PY'
import collections, os, re, subprocess, sys
folder = sys.argv[1]
lines = {}
def source(path, line):
    if path not in lines:
        try: lines[path] = open(path, errors="replace").read().splitlines()
        except OSError: lines[path] = []
    return lines[path][line - 1] if 0 < line <= len(lines[path]) else ""
def frames(section):
    """(function, file, line) of each frame; line 0 where the report gives none."""
    out = []
    for name, where in re.findall(r"#\d+ (\S+) (\S+)", section):
        path, _, rest = where.partition(":")
        out.append((name, path, int(rest.split(":")[0]) if rest[:1].isdigit() else 0))
    return out
def under_mutex(section):
    # The closure given to withLock is the access's own frame; the call is one or two frames up.
    return any("withLock" in source(p, l) for _, p, l in frames(section)[:3])
races = collections.Counter(); first = {}; mutex_only = 0
for name in sorted(os.listdir(folder)):
    for block in open(os.path.join(folder, name), errors="replace").read().split("==================")[1:]:
        kind = re.search(r"WARNING: ThreadSanitizer: ([^(]+)", block)
        if not kind: continue
        # The two accesses: the first two stacks of the report.
        accesses = [s for s in block.split("\n\n") if re.search(r"^\s+#0 ", s, re.M)][:2]
        if "race" in kind.group(1) and len(accesses) == 2 and all(under_mutex(s) for s in accesses):
            mutex_only += 1
            continue
        key = (kind.group(1).strip(), tuple(" <- ".join(f"{n} {os.path.basename(p)}:{l}" for n, p, l in frames(s)[:3]) for s in accesses))
        races[key] += 1
        first.setdefault(key, name)
print(f"tsan: {mutex_only} report(s) inside Mutex.withLock on both sides, not counted")
if not races:
    print("tsan: no data race")
    sys.exit(0)
text = "\n".join(f"{n}x {k} (in {folder}/{first[(k, acc)]})\n" + "\n".join("    " + a for a in acc)
                 for (k, acc), n in races.most_common())
try:
    text = subprocess.run(["swift", "demangle", "--simplified"], input=text, capture_output=True, text=True).stdout
except OSError:
    pass
print(text)
print(f"tsan: {sum(races.values())} report(s) at {len(races)} place(s)")
sys.exit(1)
PY
found=$?
[ "$tests" -eq 0 ] || echo "tsan: tests failed (log .build/tsan-test.log)" >&2
[ "$found" -eq 0 ] && [ "$tests" -eq 0 ]
