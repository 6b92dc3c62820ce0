#!/usr/bin/env bash
# Installs the system packages TxGate needs to build, run, test and benchmark.
# Idempotent: installs only what is missing. Used by `make run`, `make test`, CI and docker/Dockerfile.
#   scripts/install-deps.sh            build + runtime + test packages
#   scripts/install-deps.sh --runtime  only what the built binaries need at run time
set -euo pipefail

runtime=(libevent-2.1-7 libevent-openssl-2.1-7 libevent-pthreads-2.1-7 libssl3 libsqlite3-0 ca-certificates)
build=(libevent-dev libssl-dev libsqlite3-dev pkg-config)
test=(openssl curl oathtool)
bench=(nginx-light wrk)

want=()
case "${1:-}" in
  --runtime) want=("${runtime[@]}") ;;
  --bench)   want=("${runtime[@]}" "${build[@]}" "${test[@]}" "${bench[@]}") ;;
  "")        want=("${runtime[@]}" "${build[@]}" "${test[@]}") ;;
  *) echo "install-deps.sh: unknown option '$1' (use --runtime or --bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
