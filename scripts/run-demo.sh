#!/usr/bin/env bash
# Starts demo-bank and the gateway in front of it (used by `make run`). Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-gateway.json}"
demo_listen="${2:-127.0.0.1:9000}"
bin="$(swift build -c release --show-bin-path)"

"$bin/txgate" check --config "$config"
"$bin/demo-bank" --listen "$demo_listen" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT

gateway_url=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("publicUrl") or "http://"+c.get("listen","127.0.0.1:8080"))' "$config")
cat <<MSG

  demo-bank on http://$demo_listen, TxGate on $gateway_url. Try:

    curl -i $gateway_url/health            # open to anyone, through the gateway
    curl -i $gateway_url/-/health          # the gateway's own health
    curl -i $gateway_url/accounts          # needs a session: 307 to the login page
    open $gateway_url/am/XUI/?goto=/accounts in a browser: user demo, password Ch4ngeMe!

  README.md walks through a login and a one-shot transfer with curl.

  Ctrl-C stops both.

MSG
"$bin/txgate" serve --config "$config"
