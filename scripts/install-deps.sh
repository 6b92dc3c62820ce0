#!/usr/bin/env bash
# Installs the system packages TxGate needs to build, run, test and benchmark.
# Idempotent: installs only what is missing. Used by the Makefile, CI and docker/Dockerfile.
#   scripts/install-deps.sh            build + runtime + test packages (`make test`, CI)
#   scripts/install-deps.sh --build    what building and running need: runtime + build packages
#                                      (`make build`, `make run`, `make install`; docker/Dockerfile's build stage)
#   scripts/install-deps.sh --runtime  only what the built binaries need at run time (the image's final stage)
#   scripts/install-deps.sh --bench    everything, plus wrk (`make bench`)
#   ... --list (after the set)          print the set's packages, install nothing
# --build includes the tools the demo's instructions use (`make run`'s banner, the walk-throughs
# of README.md and docs/): oathtool for the TOTP codes, curl, and jq for the values they capture.
# The test set also has the browser tests' headless Chromium (Debian's chromium + chromium-driver)
# and the Python packages selenium, authlib, fido2 and webauthn (from PyPI with pip, only those `python3` cannot
# import): authlib is the real OAuth 2.0 / OpenID Connect client of the provider's tests.
# The test set runs the same walk-throughs with these tools (RunnableDocsTests, docs/RUNNABLE-DOCS.md).
# python3-aiosmtpd is the real SMTP server the email tests (Tests/TxGateEmailTests) deliver to.
# redis-server is the real Redis the store and cluster tests start on free loopback ports, and
# redis-sentinel (Debian's package only adds the command) the real Sentinels of the failover test.
# nginx-light (it has auth_request) is the real nginx the forward-auth tests put in front of
# TxGate's /-/authz, and the benchmark's baseline.
set -euo pipefail

runtime=(libevent-2.1-7 libevent-openssl-2.1-7 libevent-pthreads-2.1-7 libssl3 libsqlite3-0 libcurl4 libhiredis0.14 libmimalloc2.0 ca-certificates)
# libstdc++-12-dev: a release build links the Swift runtime in (--static-swift-stdlib), which
# links libstdc++ statically as well (the toolchain's static-stdlib-args.lnk asks for -lstdc++).
build=(libevent-dev libssl-dev libsqlite3-dev libcurl4-openssl-dev libhiredis-dev libmimalloc-dev pkg-config libstdc++-12-dev)
demo=(oathtool curl jq)
test=(openssl chromium chromium-driver python3 python3-pip python3-aiosmtpd redis-server redis-sentinel nginx-light)
bench=(wrk)

want=()
python_test=0   # 1: also install the test set's Python packages (selenium, authlib, fido2, webauthn)
set_name="${1:-}"
[ "$set_name" != --list ] || set_name=""
case "$set_name" in
  --runtime) want=("${runtime[@]}") ;;
  --build)   want=("${runtime[@]}" "${build[@]}" "${demo[@]}") ;;
  --bench)   want=("${runtime[@]}" "${build[@]}" "${demo[@]}" "${test[@]}" "${bench[@]}"); python_test=1 ;;
  "")        want=("${runtime[@]}" "${build[@]}" "${demo[@]}" "${test[@]}"); python_test=1 ;;
  *) echo "install-deps.sh: unknown option '$1' (use --build, --runtime or --bench, and --list)" >&2; exit 2 ;;
esac
if [ "${1:-}" = --list ] || [ "${2:-}" = --list ]; then
  printf '%s\n' "${want[@]}"
  exit 0
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# selenium drives chromium in the browser tests (Tests/IntegrationTests/browser/drive.py) and
# authlib is the OAuth client of Tests/IntegrationTests/oauth/client.py, both with the same
# `python3` the tests find on PATH. Debian's own python3 is "externally managed" (PEP 668): only
# there is --break-system-packages needed. fido2 is the software authenticator of the passkey
# tests and webauthn (py_webauthn) their independent verifier of the evidence in a Txn-Token
# (Tests/IntegrationTests/webauthn/); mcp is the Python MCP SDK whose own server and OAuth client
# the MCP tests run through the gateway (Tests/IntegrationTests/mcp/).
[ "$python_test" -eq 1 ] || exit 0
pypi=()
for spec in selenium authlib 'fido2>=2.2,<3' 'webauthn>=2,<3' 'mcp>=2,<3'; do
  m=${spec%%[<>=]*}
  python3 -c "import $m" 2>/dev/null || pypi+=("$spec")
done
[ ${#pypi[@]} -gt 0 ] || exit 0
echo "install-deps: installing ${pypi[*]} (pip)" >&2
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_ROOT_USER_ACTION=ignore
if ! pip_out=$(python3 -m pip install --quiet "${pypi[@]}" 2>&1); then
  if grep -q externally-managed <<<"$pip_out"; then
    python3 -m pip install --quiet --break-system-packages "${pypi[@]}"
  else
    echo "$pip_out" >&2
    exit 1
  fi
fi
python3 -c 'import selenium, authlib, fido2, webauthn, mcp'
