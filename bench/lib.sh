# Helpers the bench scripts share; each script sources it (`. "$ROOT/bench/lib.sh"`) after
# setting BENCH_NAME (its own name, for messages). Defines functions only: it starts nothing,
# changes no option of the script and sets no trap.

# bench_cleanup: for a script's EXIT trap: stops the processes in the script's PIDS array (those
# it started), waits for them, and removes its TMP folder.
bench_cleanup() {
  trap - EXIT INT TERM
  local p
  # A process already gone fails its kill: that must not end the cleanup (under set -e).
  for p in "${PIDS[@]:-}"; do if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}

# header_help SCRIPT: prints SCRIPT's header comment, from its second line up to the first line that
# is not a comment, without the leading "# ": what a script's -h and --help print, so that no
# fixed line range falls out of date as the comment grows.
header_help() { awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$1"; }

# A free TCP port on 127.0.0.1 (the kernel's pick; bind it soon after, it is not reserved).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT [PID] [WHAT]: returns once something listens on 127.0.0.1:PORT. Exits the script
# (its EXIT trap cleans up) when nothing does within 60 s (valgrind starts slowly), or as soon
# as PID, the process meant to listen, has exited.
wait_port() {
  local port="$1" pid="${2:-}" what="${3:-a server}" i
  for ((i = 0; i < 600; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "${BENCH_NAME:-bench}: $what exited before listening on 127.0.0.1:$port" >&2; exit 1
    fi
    sleep 0.1
  done
  echo "${BENCH_NAME:-bench}: $what never listened on 127.0.0.1:$port" >&2; exit 1
}

# cpu_ticks PID...: the user and system time these processes have used, in clock ticks
# (`getconf CLK_TCK` a second), from /proc/PID/stat, read after the command's name (which may
# hold spaces and parentheses); a process that is gone counts nothing.
cpu_ticks() {
  local t=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
  done
  echo "$t"
}

# runq_wait PID...: the time these processes' threads have spent runnable but waiting for a
# core, in nanoseconds, and the number of times they were put on one, from
# /proc/PID/task/TID/schedstat (its second and third fields): "WAIT SLICES". A worker woken
# with requests waiting that finds its core taken keeps them waiting: the tail, not the CPU.
runq_wait() {
  local p
  for p in "$@"; do cat "/proc/$p/task/"*/schedstat 2>/dev/null || true; done | awk '{ w += $2; n += $3 } END { printf "%.0f %.0f\n", w, n }'
}

# redis_inline PORT WORD...: sends one Redis command (inline, its words without spaces) to
# 127.0.0.1:PORT and prints the reply: a status or a bulk string's bytes. Fails, saying why on
# stderr, on an error reply or when the server cannot be reached. Speaks RESP itself: a machine
# given only the bench bundle has redis-server but no redis-cli.
redis_inline() {
  python3 - "$@" <<'PY'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(" ".join(sys.argv[2:]).encode() + b"\r\n")
    f = s.makefile("rb")
    head = f.readline().rstrip(b"\r\n")
    if head[:1] == b"$":
        sys.stdout.write(f.read(int(head[1:])).decode())
    elif head[:1] == b"+":
        sys.stdout.write(head[1:].decode())
    else:
        sys.exit("redis %s: %s" % (" ".join(sys.argv[2:]), head.decode() or "no answer"))
except (OSError, ValueError) as e:
    sys.exit("redis %s: %s" % (" ".join(sys.argv[2:]), e))
PY
}

# nginx_txgate_log_format NAME: an nginx `log_format NAME` (for the http block) that writes
# txgate's access line (docs/LOGS-METRICS-AUDIT.md): the same members in the same order, as
# the same JSON types, escaped as JSON. nginx has no milliseconds in its ISO time and gives
# durations in seconds. The request id is the connection's number and the request's on it,
# unique as txgate's is: nginx's `$request_id` draws 16 bytes from OpenSSL's RAND_bytes for
# every request (about 6,600 instructions, a third of a proxied request).
nginx_txgate_log_format() {
  cat <<EOF
    log_format $1 escape=json '{"ts":"\$time_iso8601","level":"info","label":"txgate","msg":"access",'
        '"bytes":\$body_bytes_sent,"client":"\$remote_addr","details":"via_upstream","duration_ms":\$request_time,'
        '"log":"access","method":"\$request_method","path":"\$uri","request_id":"\$connection-\$connection_requests",'
        '"status":\$status,"upstream_ms":\$upstream_response_time}';
EOF
}

# nginx_txgate_tls_suites: nginx directives (one line) for txgate's TLS suites in txgate's order,
# the server's order first (EventHTTP's TLSContext.serverCipherList and serverCipherSuites), so
# that both sides negotiate the same cipher (wrk, as OpenSSL, asks for AES-256 first).
nginx_txgate_tls_suites() {
  echo "ssl_prefer_server_ciphers on; ssl_conf_command Options PrioritizeChaCha;" \
    "ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;" \
    "ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;"
}

# bench_tls_cert CERT KEY: a self-signed P-256 certificate for 127.0.0.1 in CERT and its key in
# KEY, as the TLS benchmarks use; says what openssl said, and fails, if it could not make them.
bench_tls_cert() {
  local log
  log="$(openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$2" -out "$1" 2>&1)" && return 0
  printf '%s\n%s: openssl could not make the bench certificate\n' "$log" "${BENCH_NAME:-bench}" >&2
  return 1
}

# bench_password_hash [PASSWORD]: a scrypt hash of PASSWORD (default bench-password) in
# txgate's format, at a low cost (N = 16): no benchmark measures a login, and under valgrind a
# login at the default cost takes seconds.
bench_password_hash() {
  python3 - "${1:-bench-password}" <<'PY'
import base64, hashlib, os, sys
salt = os.urandom(16)
key = hashlib.scrypt(sys.argv[1].encode(), salt=salt, n=2**4, r=8, p=1, dklen=32)
b64 = lambda b: base64.b64encode(b).decode().rstrip("=")
print("$scrypt$ln=4,r=8,p=1$%s$%s" % (b64(salt), b64(key)))
PY
}

# start_nginx_server NAME WORKERS PORT LOCATION [CORES]: an nginx with WORKERS worker processes on
# 127.0.0.1:PORT whose `location /` is LOCATION (a `return` for a backend, a `proxy_pass
# http://backend` for a proxy: the upstream `backend` is 127.0.0.1:$BACKEND with 64 keep-alive
# connections), its config and logs in $TMP/NAME, access log off. Needs TMP and BACKEND set, and
# a PIDS array (the script's processes to stop on exit), to which its PID is added; sets STARTED
# to it and returns once it listens. As root, nginx's workers drop to an unprivileged user: TMP
# must be readable by them (chmod 755). CORES: a taskset core list to pin it to.
start_nginx_server() {
  local dir="$TMP/$1"; mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
worker_processes $2;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $dir/cb; proxy_temp_path $dir/pt; fastcgi_temp_path $dir/ft; uwsgi_temp_path $dir/ut; scgi_temp_path $dir/st;
    upstream backend { server 127.0.0.1:$BACKEND; keepalive 64; keepalive_requests 1000000; }
    server { listen 127.0.0.1:$3; location / { $4 } }
}
EOF
  local pin=(); [ -z "${5:-}" ] || pin=(taskset -c "$5")
  "${pin[@]}" nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' </dev/null >"$dir/out.log" 2>&1 & PIDS+=($!)
  STARTED=$!
  wait_port "$3" "$STARTED" "nginx ($1)"
}
