#!/bin/sh
# Starts the rocketmq-rust name server or broker in a container, from the
# same config templates scripts/broker and the tests use
# (lite-topic/broker/*.toml.in), changed for a container network: listeners
# on 0.0.0.0 instead of loopback, and the broker advertising $BROKER_IP.
#
#   rocketmq-entrypoint.sh namesrv [--render DIR]
#   rocketmq-entrypoint.sh broker  [--render DIR]
#
# --render DIR writes the rendered config into DIR and exits (the tests use
# it to check the compose setup without containers).
#
# Environment (defaults in brackets):
#   ROCKETMQ_HOME       data and config directory [/var/lib/rocketmq]
#   ROCKETMQ_TEMPLATES  template directory [/opt/sluice/broker]
#   NAMESRV_PORT        name server port [9876]
#   NAMESRV_ADDR        broker: the name server, IP:PORT (required)
#   BROKER_IP           broker: the IP clients reach it at (required)
#   BROKER_PORT         broker remoting port [10911] (it also listens on PORT-2)
#   BROKER_HA_PORT      broker HA port [10912]
#   BIND_ADDRESS        the listeners' address [0.0.0.0]; 127.0.0.1 where
#                       the container shares the host's network (the image
#                       test, scripts/compose-images)
#
# No ROCKETMQ_SECURITY_PROFILE here: its development profile only allows
# loopback listeners. The containers rely on the compose network's isolation.
set -eu

role="${1:-namesrv}"
render_dir=""
if [ "${2:-}" = "--render" ]; then
  render_dir="${3:?--render needs a directory}"
fi
home="${ROCKETMQ_HOME:-/var/lib/rocketmq}"
templates="${ROCKETMQ_TEMPLATES:-/opt/sluice/broker}"
out="${render_dir:-$home}"
bind="${BIND_ADDRESS:-0.0.0.0}"
mkdir -p "$out"

# Rewrites one "key = value" line of a rendered config; a template that no
# longer has the line is an error, not a broker silently bound to loopback.
set_key() { # $1 file, $2 key, $3 value
  if ! grep -q "^$2 = " "$1"; then
    echo "rocketmq-entrypoint: no '$2 = ' line in $1 (template changed?)" >&2
    exit 1
  fi
  sed -i "s|^$2 = .*|$2 = \"$3\"|" "$1"
}

case "$role" in
  namesrv)
    port="${NAMESRV_PORT:-9876}"
    sed "s|@HOME@|$home|g" "$templates/namesrv.toml.in" > "$out/namesrv.toml"
    [ -n "$render_dir" ] && exit 0
    mkdir -p "$home/namesrv"
    exec rocketmq-namesrv-rust -c "$out/namesrv.toml" --listenPort "$port" --bindAddress "$bind"
    ;;
  broker)
    : "${NAMESRV_ADDR:?set NAMESRV_ADDR to the name server IP:PORT}"
    : "${BROKER_IP:?set BROKER_IP to the address clients reach the broker at}"
    port="${BROKER_PORT:-10911}"
    ha_port="${BROKER_HA_PORT:-10912}"
    sed -e "s|@HOME@|$home|g" -e "s|@NAMESRV@|$NAMESRV_ADDR|g" \
        -e "s|@PORT@|$port|g" -e "s|@HA_PORT@|$ha_port|g" \
        "$templates/broker.toml.in" > "$out/broker.toml"
    set_key "$out/broker.toml" brokerIp1 "$BROKER_IP"
    set_key "$out/broker.toml" bindAddress "$bind"
    set_key "$out/broker.toml" haListenAddress "$bind"
    [ -n "$render_dir" ] && exit 0
    mkdir -p "$home/store"
    exec rocketmq-broker-rust -c "$out/broker.toml" -n "$NAMESRV_ADDR"
    ;;
  *)
    echo "usage: rocketmq-entrypoint.sh namesrv|broker [--render DIR]" >&2
    exit 2
    ;;
esac
