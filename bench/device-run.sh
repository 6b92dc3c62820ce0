#!/usr/bin/env bash
# Issue 29's many-core measurements in one command on a lent 16-core machine, which allows 10
# minutes a command and about 15 minutes of machine time a session: devbench's proxy table at
# 1, 2, 4 and 8 workers, TLS at 1 and 4, the step-up cycle at 1 and 4, and, with perf in DIR,
# the profile at 8 workers. Each section runs under its own time limit (480 s in all), so the
# whole fits in one command and a section that overruns costs only itself; what finished is
# kept in $OUT/results.tgz and its tables are printed.
#
#   bash bench/device-run.sh [DIR]
#
# DIR (default .devbench, git-ignored: carry it to the machine) holds what devbench's
# make-bundle.sh writes there: bundle.tar.xz (txgate, demo-bank, nginx, HAProxy, wrk,
# redis-server and their libraries) and devbench.py. Optional: txgate.xz (another txgate to
# measure instead of the bundle's, e.g. a base build, `xz -k` of it), tls.crt, tls.key and tls
# (one certificate for the TLS section; without them devbench makes one with openssl, if the
# machine has it), perf.tar.xz (a perf binary and the libraries it loads, for the profile).
# Environment: OUT (where results go; the device tool sets it, default /tmp/device-out),
# DEVICE_SECTIONS (default "proxy tls stepup profile").
#
# Everything listens on 127.0.0.1 (devbench's layout: the proxy on the first cores, wrk on
# 8-11, the backend on 12-15). Compare ratios within one run (txgate against nginx and HAProxy
# measured beside it), not absolute figures across machines.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$(cd "${1:-$ROOT/.devbench}" 2>/dev/null && pwd)" || { echo "device-run.sh: no such folder: ${1:-.devbench}" >&2; exit 2; }
OUT="${OUT:-/tmp/device-out}"
SECTIONS="${DEVICE_SECTIONS:-proxy tls stepup profile}"
for f in bundle.tar.xz devbench.py; do
  [ -f "$DIR/$f" ] || { echo "device-run.sh: $DIR/$f is missing (run devbench's make-bundle.sh from the project root)" >&2; exit 2; }
done
B="$(mktemp -d /tmp/device-bundle.XXXXXX)"
trap 'rm -rf "$B"' EXIT
mkdir -p "$OUT"
tar xJf "$DIR/bundle.tar.xz" -C "$B" || { echo "device-run.sh: $DIR/bundle.tar.xz does not unpack" >&2; exit 1; }
if [ -f "$DIR/txgate.xz" ]; then
  xz -dc "$DIR/txgate.xz" > "$B/bin/txgate" && chmod +x "$B/bin/txgate" || { echo "device-run.sh: $DIR/txgate.xz does not unpack" >&2; exit 1; }
fi
export PYTHONUNBUFFERED=1
START=$(date +%s)
echo "machine: $(nproc) cores, $(uname -r); txgate: $(LD_LIBRARY_PATH="$B/lib" "$B/bin/txgate" --version 2>&1 | head -1)" | tee "$OUT/machine.txt"

# section NAME LIMIT_SECONDS DEVBENCH_ARGS...: one devbench run, its JSON lines and tables in
# $OUT/NAME.txt, its log in $OUT/NAME.err.
section() {
  local name="$1" limit="$2" t0 rc
  shift 2
  t0=$(date +%s)
  timeout -k 5 "$limit" python3 "$DIR/devbench.py" "$B" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err"
  rc=$?
  echo "[$name] exit $rc after $(( $(date +%s) - t0 )) s$([ "$rc" = 124 ] && echo ' (stopped at its time limit)')"
}

for s in $SECTIONS; do
  case "$s" in
    proxy) section proxy 200 --workers 1,2,4,8 --rounds 3 --seconds 3 --sections proxy ;;
    tls)
      cert=()
      [ -f "$DIR/tls.crt" ] && [ -f "$DIR/tls.key" ] && [ -f "$DIR/tls" ] && cert=(--cert "$DIR/tls")
      section tls 70 --workers 1,4 --rounds 1 --seconds 3 --sections tls ${cert[@]+"${cert[@]}"} ;;
    stepup) section stepup 150 --workers 1,4 --sections stepup ;;
    profile)
      if [ -f "$DIR/perf.tar.xz" ]; then
        P="$(mktemp -d /tmp/device-perf.XXXXXX)"
        tar xJf "$DIR/perf.tar.xz" -C "$P"
        t0=$(date +%s)
        # Two profiles (txgate, then nginx), 8 s of wrk and three reports each.
        timeout -k 5 60 bash "$ROOT/bench/devbench-profile.sh" "$B" "$P" "$OUT" 8 > "$OUT/profile.log" 2>&1
        rc=$?
        echo "[profile] exit $rc after $(( $(date +%s) - t0 )) s"
        rm -rf "$P"
      else
        echo "[profile] skipped: no $DIR/perf.tar.xz"
      fi ;;
    *) echo "device-run.sh: unknown section '$s' (proxy, tls, stepup, profile)" >&2 ;;
  esac
done

tar czf "/tmp/device-results.tgz" -C "$OUT" . && mv /tmp/device-results.tgz "$OUT/results.tgz"
echo "all sections: $(( $(date +%s) - START )) s; results in $OUT/results.tgz"
for s in proxy tls stepup; do
  [ -s "$OUT/$s.txt" ] && { echo; echo "== $s"; grep -v '^{' "$OUT/$s.txt"; }
done
[ -f "$OUT/txgate-dso.txt" ] && { echo; echo "== profile (txgate, by library)"; head -8 "$OUT/txgate-dso.txt"; }
exit 0
