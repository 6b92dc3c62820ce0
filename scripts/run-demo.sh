#!/usr/bin/env bash
# Starts demo-bank and the gateway in front of it (used by `make run`). Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-gateway.json}"
demo_listen="${2:-127.0.0.1:9000}"
bin="$(swift build -c release --show-bin-path)"

"$bin/txgate" check --config "$config"
# The gateway's URL for the hints below (publicUrl, else listen), read without python: `make run`
# installs only what building and running need (scripts/install-deps.sh --build).
json_string() { sed -n 's/^[[:space:]]*"'"$1"'"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$config" | head -n 1; }
gateway_url=$(json_string publicUrl)
[ -n "$gateway_url" ] || gateway_url="http://$(json_string listen)"
[ "$gateway_url" != "http://" ] || gateway_url="http://127.0.0.1:8080"

# With txnTokens enabled, demo-bank verifies the gateway's Transaction Token on every transfer
# (defense in depth: a transfer runs only as the user approved it).
bank_args=()
if grep -Eq '"txnTokens"[^}]*"enabled"[[:space:]]*:[[:space:]]*true' "$config"; then
  bank_args=(--txn-token-jwks "$gateway_url/am/oauth2/realms/root/connect/jwk_uri")
fi
"$bin/demo-bank" --listen "$demo_listen" "${bank_args[@]}" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT
cat <<MSG

  demo-bank on http://$demo_listen, TxGate on $gateway_url. Try:

    curl -i $gateway_url/health            # open to anyone, through the gateway
    curl -i $gateway_url/-/health          # the gateway's own health
    curl -i $gateway_url/accounts          # needs a session: 307 to the login page
    open $gateway_url/ in a browser: sign in as demo (password Ch4ngeMe!), send a transfer
    from the form, approve it with the TOTP code (oathtool --totp -b JBSWY3DPEHPK3PXP)

  README.md walks through a login and a one-shot transfer with curl.
  The binaries are $bin/txgate and $bin/demo-bank
  (\`make install\` puts both on PATH, in /usr/local/bin).

  Ctrl-C stops both.

MSG
"$bin/txgate" serve --config "$config"
