#!/usr/bin/env bash
# Starts demo-bank and the gateway in front of it (used by `make run`). Ctrl-C stops both.
# The banner with the URLs to try comes once both accept connections, never before a failure.
# TXGATE_BIN_DIR: the folder holding txgate and demo-bank (default: the release build's).
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-gateway.json}"
demo_listen="${2:-127.0.0.1:9000}"
bin="${TXGATE_BIN_DIR:-$(swift build -c release --show-bin-path)}"

"$bin/txgate" check --config "$config"
# The gateway's URL for the hints below (publicUrl, else listen), read without python: `make run`
# installs only what building and running need (scripts/install-deps.sh --build).
json_string() { sed -n 's/^[[:space:]]*"'"$1"'"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$config" | head -n 1; }
gateway_listen=$(json_string listen)
[ -n "$gateway_listen" ] || gateway_listen="127.0.0.1:8080"
gateway_url=$(json_string publicUrl)
[ -n "$gateway_url" ] || gateway_url="http://$gateway_listen"

# Whether something accepts TCP connections on HOST:PORT (0.0.0.0 and [::] are probed on loopback).
accepts() {
  local host="${1%:*}" port="${1##*:}"
  host="${host#[}"; host="${host%]}"
  case "$host" in 0.0.0.0) host=127.0.0.1 ;; ::) host=::1 ;; esac
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}
# Something else on either address would answer in our place: say so, and start nothing.
for a in "$demo_listen" "$gateway_listen"; do
  if accepts "$a"; then echo "run-demo: $a is in use (another process listens on it): stop it, or choose another address" >&2; exit 1; fi
done

# With txnTokens enabled, demo-bank verifies the gateway's Transaction Token on every transfer
# (defense in depth: a transfer runs only as the user approved it).
bank_args=()
if grep -Eq '"txnTokens"[^}]*"enabled"[[:space:]]*:[[:space:]]*true' "$config"; then
  bank_args=(--txn-token-jwks "$gateway_url/am/oauth2/realms/root/connect/jwk_uri")
fi
"$bin/demo-bank" --listen "$demo_listen" "${bank_args[@]}" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT

# Waits until `address` accepts; fails, naming `name`, if `pid` ends first or after 30 s.
wait_for() {
  local pid="$1" address="$2" name="$3" status
  for _ in $(seq 1 300); do
    accepts "$address" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      status=0; wait "$pid" || status=$?
      echo "run-demo: $name exited (status $status) before listening on $address" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "run-demo: $name does not listen on $address after 30 s" >&2
  exit 1
}
wait_for "$demo" "$demo_listen" demo-bank

# The banner waits for the gateway in the background; the gateway runs in the foreground, so
# that Ctrl-C reaches it as before. Nothing else listens on its address (checked above): if it
# fails to start, the script ends and the EXIT trap removes the watcher before it prints.
banner() {
cat <<MSG

  demo-bank on http://$demo_listen, TxGate on $gateway_url. Try:

    curl -i $gateway_url/health            # open to anyone, through the gateway
    curl -i $gateway_url/-/health          # the gateway's own health
    curl -i $gateway_url/accounts          # needs a session: 307 to the login page
    open $gateway_url/ in a browser: sign in as demo (password Ch4ngeMe!), send a transfer
    from the form, approve it with the TOTP code (oathtool --totp -b JBSWY3DPEHPK3PXP);
    then create a passkey at $gateway_url/am/XUI/passkeys and approve the next one with it

  docs/TRANSACTIONS.md walks through a login and a one-shot transfer with curl.
  The binaries are $bin/txgate and $bin/demo-bank
  (\`make install\` puts both on PATH, in /usr/local/bin).

  Ctrl-C stops both.

MSG
}
( for _ in $(seq 1 300); do if accepts "$gateway_listen"; then banner; exit 0; fi; sleep 0.1; done ) &
watcher=$!
trap 'kill $demo $watcher 2>/dev/null || true' EXIT
"$bin/txgate" serve --config "$config"
