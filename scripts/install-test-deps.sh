#!/usr/bin/env bash
# System packages the test suite needs on a fresh Debian machine (run as root; skips what is there):
# - etcd-server: the registry's etcd tests start their own etcd on loopback ports;
# - chromium: the dashboard's browser test and `npm run docs:screenshot` (driven by playwright-core,
#   which never downloads a browser of its own);
# - nginx, openssl, curl, systemd (systemd-analyze): test/deploy.test.ts runs deploy/nginx-motor.conf
#   (TLS, a self-signed cert) and the curl line of docs/deploy.md, and verifies the systemd units;
# - redis-server: the routing-sync and response-store tests start their own Redis on loopback ports.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

missing=()
[ -x "${MOTOR_ETCD_BIN:-/usr/bin/etcd}" ] || missing+=(etcd-server)
[ -x "${MOTOR_CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
command -v systemd-analyze >/dev/null || missing+=(systemd)
[ -x "${MOTOR_REDIS_BIN:-/usr/bin/redis-server}" ] || missing+=(redis-server)

if [ ${#missing[@]} -gt 0 ]; then
  apt-get update
  apt-get install -y "${missing[@]}"
fi
