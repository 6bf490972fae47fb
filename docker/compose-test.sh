#!/usr/bin/env bash
# Proves compose.yaml with a real Docker engine: build the images, start the
# stack, produce and consume through the published port, wait for the archive
# job's Parquet output, then take everything down (volumes too).
#
# The engine: one that answers `docker info`, or else Debian's dockerd (package
# docker.io), which this script starts when it runs as root and stops at the end.
# Compose: the `docker compose` plugin, or else Debian's `docker-compose` (v1),
# which predates the top-level `name:` key, so it reads a copy without it.
# The images' base: the public python image when it can be pulled, else a
# stand-in built from Debian's packages (docker/standin-base.sh, needs debootstrap).
#
# Where no engine can be had it says so in one line and exits 0 without claiming
# anything: the static checks in tests/product/test_compose.py still run in
# `make test`. COMPOSE_TEST_REQUIRED=1 turns that case into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

BROKER=".venv/bin/broker"
PROJECT="trio-kafka-compose-test"
PUBLIC_BASE="$(sed -n 's/^ARG BASE_IMAGE=//p' docker/Dockerfile.broker)"
STEP_TIMEOUT_S=600
work="$(mktemp -d)"
started_dockerd=""

not_run() {
  echo "compose-test: NOT RUN: $1"
  [ "${COMPOSE_TEST_REQUIRED:-0}" = "1" ] && exit 1
  exit 0
}

stop_started_dockerd() {
  if [ -n "$started_dockerd" ]; then
    kill "$started_dockerd" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$started_dockerd" 2>/dev/null || break; sleep 1; done
  fi
}

# Starts Debian's dockerd when none answers; false when that cannot be done here.
ensure_engine() {
  command -v docker >/dev/null 2>&1 || return 1
  docker info >/dev/null 2>&1 && return 0
  command -v dockerd >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] || return 1
  dockerd >"$work/dockerd.log" 2>&1 &
  started_dockerd=$!
  for _ in $(seq 1 30); do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$started_dockerd" 2>/dev/null || break
    sleep 1
  done
  echo "compose-test: dockerd did not come up; its log ends:" >&2
  tail -5 "$work/dockerd.log" >&2
  stop_started_dockerd
  started_dockerd=""
  return 1
}

# Installs Debian's engine, compose and debootstrap when the proof is required.
install_debian_tools() {
  [ "${COMPOSE_TEST_REQUIRED:-0}" = "1" ] && [ "$(id -u)" -eq 0 ] || return 0
  command -v apt-get >/dev/null 2>&1 || return 0
  local missing=""
  for entry in dockerd:docker.io docker-compose:docker-compose debootstrap:debootstrap; do
    command -v "${entry%%:*}" >/dev/null 2>&1 || missing="$missing ${entry#*:}"
  done
  [ -z "$missing" ] && return 0
  echo "compose-test: installing Debian packages:$missing"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

trap 'stop_started_dockerd; rm -rf "$work"' EXIT
install_debian_tools

ensure_engine || not_run "no Docker engine answers or can be started here (install Debian's docker.io and run as root, or start one)."

if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose -p "$PROJECT")
elif command -v docker-compose >/dev/null 2>&1; then
  grep -v '^name:' compose.yaml >"$work/compose.yaml"
  COMPOSE=(docker-compose -p "$PROJECT" --project-directory . -f "$work/compose.yaml")
else
  not_run "no compose tool: neither the docker compose plugin nor Debian's docker-compose."
fi

if docker image inspect "$PUBLIC_BASE" >/dev/null 2>&1 \
  || timeout 120 docker pull -q "$PUBLIC_BASE" >/dev/null 2>&1; then
  export BASE_IMAGE="$PUBLIC_BASE"
else
  echo "compose-test: $PUBLIC_BASE cannot be pulled; building a stand-in from Debian's packages"
  BASE_IMAGE="$(timeout "$STEP_TIMEOUT_S" docker/standin-base.sh)" \
    || not_run "neither $PUBLIC_BASE nor a Debian stand-in base (debootstrap) can be had."
  export BASE_IMAGE
fi

compose() { "${COMPOSE[@]}" "$@"; }

cleanup() {
  compose down --volumes --remove-orphans >/dev/null 2>&1 || true
  stop_started_dockerd
  rm -rf "$work"
}
trap cleanup EXIT

echo "compose-test: building the images on $BASE_IMAGE"
timeout "$STEP_TIMEOUT_S" "${COMPOSE[@]}" build -q
compose up -d broker
for _ in $(seq 1 60); do
  health="$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q broker)" 2>/dev/null || true)"
  [ "$health" = "healthy" ] && break
  sleep 2
done
[ "$health" = "healthy" ] || { echo "compose-test: the broker never became healthy"; compose logs --tail 50 broker; exit 1; }

topic="compose-test-$$"
seq 1 100 | sed 's/^/record-/' | "$BROKER" client produce events -b 127.0.0.1:9092
seq 1 100 | sed 's/^/record-/' | "$BROKER" client produce "$topic" -b 127.0.0.1:9092
got=$("$BROKER" client consume "$topic" -b 127.0.0.1:9092 --from-beginning -e | wc -l)
[ "$got" -eq 100 ] || { echo "compose-test: consumed $got of 100 records"; exit 1; }

compose up -d pipeline
for _ in $(seq 1 60); do
  # The archive is partitioned: archive/topic=<topic>/date=<day>/part-*.parquet.
  if compose exec -T pipeline \
    sh -c 'find /var/lib/pipeline/archive -name "*.parquet" | grep -q .' >/dev/null 2>&1; then
    echo "compose-test: passed (100 records through localhost:9092, archive written, base $BASE_IMAGE)"
    exit 0
  fi
  sleep 5
done
echo "compose-test: the archive job wrote no Parquet within 300 s"
compose logs --tail 50 pipeline
exit 1
