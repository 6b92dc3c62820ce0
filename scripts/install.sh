#!/usr/bin/env bash
# `make install`, `make install-service`, `make uninstall`: puts the built binaries, the systemd
# unit and a sample configuration in place. Paths come from the Makefile (environment):
#   DESTDIR      staging root prepended to every path below (packaging; empty: the real system)
#   BINDIR       txgate and demo-bank                       (default $PREFIX/bin)
#   UNITDIR      txgate.service                             (default $PREFIX/lib/systemd/system)
#   SYSCONFDIR   txgate/gateway.json, installed only if absent (default /etc)
#   BUILT        the folder holding the built txgate and demo-bank
# Runs as the calling user; only the copies use sudo, and only when a destination is not writable.
#   scripts/install.sh install | uninstall | enable
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PREFIX:=/usr/local}" "${DESTDIR:=}"
: "${BINDIR:=$PREFIX/bin}" "${UNITDIR:=$PREFIX/lib/systemd/system}" "${SYSCONFDIR:=/etc}"
unit_src=dist/systemd/txgate.service.in
sample=dist/gateway.sample.json

bin_dest="$DESTDIR$BINDIR"
unit_dest="$DESTDIR$UNITDIR"
conf_dest="$DESTDIR$SYSCONFDIR/txgate"

# sudo only when one of the destinations cannot be created or written as the calling user.
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  for d in "$bin_dest" "$unit_dest" "$conf_dest"; do
    if [ "${1:-}" = uninstall ]; then
      if [ -e "$d" ] && [ ! -w "$d" ]; then sudo=sudo; break; fi
    elif ! { mkdir -p "$d" 2>/dev/null && [ -w "$d" ]; }; then
      sudo=sudo; break
    fi
  done
fi

case "${1:-}" in
  install)
    : "${BUILT:?set BUILT to the folder holding the built txgate and demo-bank}"
    for b in txgate demo-bank; do
      [ -x "$BUILT/$b" ] || { echo "install: $BUILT/$b is missing: build first (make build)" >&2; exit 1; }
    done
    # A binary linked without --static-swift-stdlib (a debug build, or `swift build -c release`
    # by hand) loads the Swift runtime from the toolchain's folder at every start: the service
    # stops starting once that folder goes (a toolchain upgraded or removed) or is hidden from it
    # (the unit's ProtectHome=yes hides one under /home or /root, where swiftly installs).
    for b in txgate demo-bank; do
      runtime=$(ldd "$BUILT/$b" 2>/dev/null | awk '$1 == "libswiftCore.so" { print $3 }' || true)
      if [ "$runtime" = not ]; then
        echo "install: warning: $BUILT/$b needs the Swift runtime (libswiftCore.so) and cannot find it: it will not start; \`make install\` without BUILT builds it with --static-swift-stdlib" >&2
      elif [ -n "$runtime" ]; then
        echo "install: warning: $BUILT/$b loads the Swift runtime from ${runtime%/*}, so it starts only while that folder is there and readable (ProtectHome=yes hides /home and /root from the service); \`make install\` without BUILT builds it with --static-swift-stdlib" >&2
      fi
    done
    $sudo install -d "$bin_dest" "$unit_dest" "$conf_dest"
    $sudo install -m 0755 "$BUILT/txgate" "$BUILT/demo-bank" "$bin_dest/"
    # The unit names the installed paths (without DESTDIR: where they are once unpacked).
    unit=$(mktemp)
    trap 'rm -f "$unit"' EXIT
    sed -e "s|@BINDIR@|$BINDIR|g" -e "s|@SYSCONFDIR@|$SYSCONFDIR|g" "$unit_src" >"$unit"
    $sudo install -m 0644 "$unit" "$unit_dest/txgate.service"
    # An operator's configuration is never overwritten.
    if [ -e "$conf_dest/gateway.json" ]; then
      conf_note="kept $conf_dest/gateway.json (exists)"
    else
      $sudo install -m 0644 "$sample" "$conf_dest/gateway.json"
      conf_note="sample configuration in $conf_dest/gateway.json"
    fi
    echo "installed $("$BUILT/txgate" --version) and demo-bank in $bin_dest"
    echo "installed $unit_dest/txgate.service; $conf_note"
    ;;
  enable)
    if [ -n "$DESTDIR" ]; then echo "install-service: DESTDIR is set; enable the unit on the target system" >&2; exit 2; fi
    command -v systemctl >/dev/null || { echo "install-service: systemctl not found (is this a systemd system?)" >&2; exit 1; }
    s=""; [ "$(id -u)" -eq 0 ] || s=sudo
    $s systemctl daemon-reload
    $s systemctl enable txgate.service
    echo "enabled txgate.service; edit $SYSCONFDIR/txgate/gateway.json, then: sudo systemctl start txgate"
    ;;
  uninstall)
    # The configuration and the state (/var/lib/txgate) are the operator's: kept.
    if [ -z "$DESTDIR" ] && command -v systemctl >/dev/null && systemctl is-enabled --quiet txgate.service 2>/dev/null; then
      s=""; [ "$(id -u)" -eq 0 ] || s=sudo
      $s systemctl disable --now txgate.service
    fi
    $sudo rm -f "$bin_dest/txgate" "$bin_dest/demo-bank" "$unit_dest/txgate.service"
    echo "removed txgate, demo-bank and txgate.service; kept $conf_dest and the state folder"
    ;;
  *)
    echo "install.sh: unknown action '${1:-}' (use install, enable or uninstall)" >&2
    exit 2
    ;;
esac
