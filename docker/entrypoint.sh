#!/bin/sh
# The image's entrypoint: `txgate` with its configuration and upstream from the environment.
#   TXGATE_CONFIG    the configuration file (default /etc/txgate/gateway.json; mount your own there
#                    or elsewhere and point this at it)
#   TXGATE_UPSTREAM  the backend URL, e.g. http://backend:9000 (becomes `--upstream`, overriding the
#                    file's upstream.url; unset: the file's)
#   TXGATE_LISTEN    HOST:PORT (default 0.0.0.0:8080; empty: the file's `listen`)
# No arguments, or `serve ...`: txgate serve with the above (arguments given win over them).
# `check ...`: txgate check on TXGATE_CONFIG. Anything else (--version, hash-password, ...) is
# passed to txgate as it is.
set -eu
config="${TXGATE_CONFIG:-/etc/txgate/gateway.json}"
[ "$#" -gt 0 ] || set -- serve

case "$1" in
  serve)
    shift
    set -- --config "$config" "$@"
    if [ -n "${TXGATE_LISTEN:-}" ]; then set -- --listen "$TXGATE_LISTEN" "$@"; fi
    if [ -n "${TXGATE_UPSTREAM:-}" ]; then
      set -- --upstream "$TXGATE_UPSTREAM" "$@"
    elif grep -Eq '"url"[[:space:]]*:[[:space:]]*"https?://(127\.|localhost|\[::1\])' "$config" 2>/dev/null; then
      echo "txgate entrypoint: warning: $config sends to a loopback upstream, i.e. inside this container;" \
           "set TXGATE_UPSTREAM=http://HOST:PORT or mount a configuration whose upstream.url is reachable" >&2
    fi
    exec txgate serve "$@"
    ;;
  check)
    shift
    exec txgate check --config "$config" "$@"
    ;;
  *)
    exec txgate "$@"
    ;;
esac
