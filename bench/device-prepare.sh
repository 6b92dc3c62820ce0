#!/usr/bin/env bash
# Adds to .devbench what bench/device-run.sh uses beside devbench's bundle (which make-bundle.sh,
# in devbench's folder, writes there first): txgate.xz (this checkout's release build as
# `make build` links it, --static-swift-stdlib, with its symbols and without its debug
# information: the bundle's copy is linked against the Swift runtime and stripped, and the
# profiles need the symbols), store-bench.xz (the stores' ceilings, bench/store.sh's; built
# against the Swift runtime in .build/device, as a static one would not fit in the 64 MiB the
# device tool carries beside the bundle and txgate; it needs no library the bundle does not
# hold), perf.tar.xz (perf and the
# shared libraries ldd names for it, glibc's own left out, under lib/), and one P-256
# certificate for the TLS sections (tls.crt, tls.key, and both in tls).
#
#   bash bench/device-prepare.sh
#
# Then, with the device tool: carry .devbench, run `bash bench/device-run.sh`, timeout_s 590.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
D="$ROOT/.devbench"
[ -f "$D/bundle.tar.xz" ] || { echo "device-prepare.sh: no $D/bundle.tar.xz: run devbench's make-bundle.sh from the project root first" >&2; exit 2; }
cd "$ROOT"
# The commit, as `make build` bakes it in: the device run's machine.txt names it (`txgate --version`).
TXGATE_COMMIT="${TXGATE_COMMIT:-$(git describe --always --dirty --abbrev=12 --exclude '*' 2>/dev/null || echo unknown)}"
export TXGATE_COMMIT
swift build -c release --static-swift-stdlib --product txgate >/dev/null
swift build -c release --scratch-path .build/device --product store-bench >/dev/null
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
strip --strip-debug -o "$T/txgate" "$(swift build -c release --show-bin-path)/txgate"
xz -T2 -6 -c "$T/txgate" > "$D/txgate.xz"
xz -T2 -6 -c "$(swift build -c release --scratch-path .build/device --show-bin-path)/store-bench" > "$D/store-bench.xz"
if command -v perf >/dev/null; then
  P="$T/perf"
  mkdir -p "$P/lib"
  cp "$(command -v perf)" "$P/"
  ldd "$(command -v perf)" | awk '$3 ~ /^\// { print $3 }' \
    | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libresolv|libpthread|libdl|librt)\.so' \
    | xargs -I{} cp -L {} "$P/lib/"
  tar cf - -C "$P" . | xz -T2 -6 > "$D/perf.tar.xz"
else
  echo "device-prepare.sh: no perf here (apt-get install linux-perf): the profile sections will be skipped" >&2
  rm -f "$D/perf.tar.xz"
fi
BENCH_NAME=device-prepare.sh
. "$ROOT/bench/lib.sh"
bench_tls_cert "$D/tls.crt" "$D/tls.key"
cat "$D/tls.crt" "$D/tls.key" > "$D/tls"
ls -la "$D"
du -sh "$D"
