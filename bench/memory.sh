#!/usr/bin/env bash
# The gateway's resident memory (VmRSS, and VmHWM, its peak) in two situations, on loopback:
#   1. N_CONN idle keep-alive client connections (each has made one request, then stays open);
#   2. N_SESSIONS sessions and as many pending transactions in a Redis store (one login and one
#      challenged POST /transfer per session, from 4 client processes).
#
#   bash bench/memory.sh [N_CONN (default 10000)] [N_SESSIONS (default 100000)]
#
# Environment: TXGATE_BIN (this txgate binary instead of building one). Needs redis-server and
# python3 (bash scripts/install-deps.sh --bench). Every process started and the temp dir are
# removed on exit. Not part of `make test`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N_CONN="${1:-10000}"
N_SESSIONS="${2:-100000}"
cd "$ROOT"
[ -n "${TXGATE_BIN:-}" ] || swift build -c release --static-swift-stdlib --product txgate >/dev/null
swift build -c release --static-swift-stdlib --product demo-bank >/dev/null
BIN="$(swift build -c release --show-bin-path)"
TXGATE="${TXGATE_BIN:-$BIN/txgate}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-mem.XXXXXX")"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

BENCH_NAME=memory.sh
. "$ROOT/bench/lib.sh"
rss() { grep -E 'VmRSS|VmHWM' "/proc/$1/status" | awk '{ printf "%s %.1f MB  ", $1, $2 / 1024 }'; }

BANK_PORT="$(free_port)"
"$BIN/demo-bank" --listen "127.0.0.1:$BANK_PORT" >"$TMP/bank.log" 2>&1 & PIDS+=($!)
wait_port "$BANK_PORT"
ulimit -n $((N_CONN + 2000))

# 1. Idle connections.
PORT="$(free_port)"
cat >"$TMP/idle.json" <<EOF
{"listen":"127.0.0.1:$PORT","workers":1,"upstream":{"url":"http://127.0.0.1:$BANK_PORT"},"log":{"access":false,"level":"warning"},"limits":{"maxConnectionsPerClient":0}}
EOF
"$TXGATE" serve --config "$TMP/idle.json" >"$TMP/idle.log" 2>&1 & GW=$!; PIDS+=($GW)
wait_port "$PORT"
echo "idle connections: at start: $(rss $GW)"
python3 - "$PORT" "$N_CONN" "$TMP/idle.ready" <<'PY' & CLIENT=$!
import socket, sys, time
port, n, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: bench\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    socks.append(s)
open(ready, "w").write(str(len(socks)))
time.sleep(30)
PY
for _ in $(seq 1 600); do [ -f "$TMP/idle.ready" ] && break; sleep 0.5; done
sleep 1
echo "idle connections: $N_CONN open ($(($(ls "/proc/$GW/fd" | wc -l))) descriptors): $(rss $GW)"
kill "$CLIENT" "$GW" 2>/dev/null || true; wait "$CLIENT" "$GW" 2>/dev/null || true

# 2. Sessions and pending transactions in Redis.
REDIS_PORT="$(free_port)"; PORT="$(free_port)"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no >"$TMP/redis.log" 2>&1 & PIDS+=($!)
wait_port "$REDIS_PORT"
python3 - "$PORT" "$BANK_PORT" "$REDIS_PORT" "$(bench_password_hash)" >"$TMP/redis.json" <<'PY'
import json, sys
gp, bp, rp, phash = sys.argv[1:5]
print(json.dumps({"listen": f"127.0.0.1:{gp}", "publicUrl": f"http://127.0.0.1:{gp}", "workers": 1,
  "upstream": {"url": f"http://127.0.0.1:{bp}"}, "log": {"access": False, "level": "warning"},
  "store": {"type": "redis", "url": f"redis://127.0.0.1:{rp}/0"}, "limits": {"maxConnectionsPerClient": 0},
  "users": [{"username": "bench", "passwordHash": phash,
             "totpSecret": "JBSWY3DPEHPK3PXP"}],
  "journeys": {"Login": [{"type": "UsernamePassword"}], "ConfirmTransaction": [{"type": "TOTP"}]},
  "security": {"maxPendingTransactions": 10000000},
  "policies": [{"name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                "transaction": {"journey": "ConfirmTransaction", "ttlS": 3600, "bind": {"body": ["/amount"]},
                                "display": "Approve {amount}?"}}]}))
PY
TXGATE_SIGNING_KEY="$(head -c 32 /dev/urandom | base64)" "$TXGATE" serve --config "$TMP/redis.json" >"$TMP/redis-gw.log" 2>&1 & GW=$!; PIDS+=($GW)
wait_port "$PORT"
echo "redis store: at start: $(rss $GW)"
FILLERS=()
for _ in 1 2 3 4; do
  python3 - "$PORT" $((N_SESSIONS / 4)) <<'PY' & FILLERS+=($!)
import http.client, json, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port)
def post(path, body, headers={}):
    c.request("POST", path, body=json.dumps(body) if body is not None else b"", headers={"Content-Type": "application/json", **headers})
    r = c.getresponse(); return r.status, r.read()
auth = "/am/json/realms/root/authenticate"
for _ in range(n):
    step = json.loads(post(auth, None)[1])
    step["callbacks"][0]["input"][0]["value"] = "bench"
    step["callbacks"][1]["input"][0]["value"] = "bench-password"
    token = json.loads(post(auth, step)[1])["tokenId"]
    status, _ = post("/transfer", {"amount": 100}, {"iPlanetDirectoryPro": token, "x-authenticate-response": "header"})
    assert status == 401, status
PY
done
for p in "${FILLERS[@]}"; do wait "$p"; done
echo "redis store: $N_SESSIONS sessions and pending transactions ($(redis-cli -p "$REDIS_PORT" dbsize) keys): $(rss $GW)"
