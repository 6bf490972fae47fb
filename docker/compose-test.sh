#!/usr/bin/env bash
# Proves compose.yaml with a real Docker engine: build the images, start the
# stack, produce and consume through the published port, wait for the archive
# job's Parquet output, then take everything down (volumes too).
#
# The engine: one that answers `docker info`, or else Debian's dockerd (package
# docker.io), which this script starts when it runs as root and stops at the end.
# Compose: the `docker compose` plugin (v2) and Debian's `docker-compose` (1.29), each
# where installed, both on the same compose.yaml (the project name is in .env, which
# both read; 1.29 rejects a top-level `name:`). Images are built once, by the first.
# The images' base: the public python image when it can be pulled, else a
# stand-in built from Debian's packages (docker/standin-base.sh, needs debootstrap).
#
# Where no engine can be had it says so in one line and exits 0 without claiming
# anything: the static checks in tests/product/test_compose.py still run in
# `make test`. COMPOSE_TEST_REQUIRED=1 turns that case into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# The host-side client (a test stands in its own for a run without an engine).
BROKER="${COMPOSE_TEST_BROKER:-.venv/bin/broker}"
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

# Every profile validated by every compose tool found, engine or not (no engine needed
# for `config`); the `cluster` profile's manual check is in docs/replication.md.
for tool in "docker compose" "docker-compose"; do
  read -r -a validate <<<"$tool"
  "${validate[@]}" version >/dev/null 2>&1 || continue
  for profile in spark secured cluster; do
    "${validate[@]}" --profile "$profile" config -q \
      || { echo "compose-test: $tool: profile $profile of compose.yaml is invalid"; exit 1; }
  done
done

ensure_engine || not_run "no Docker engine answers or can be started here (install Debian's docker.io and run as root, or start one)."

# Every compose tool found here proves the same file, one after the other.
tools=()
docker compose version >/dev/null 2>&1 && tools+=("docker compose")
command -v docker-compose >/dev/null 2>&1 && tools+=("docker-compose")
[ "${#tools[@]}" -gt 0 ] \
  || not_run "no compose tool: neither the docker compose plugin nor Debian's docker-compose."

if docker image inspect "$PUBLIC_BASE" >/dev/null 2>&1 \
  || timeout 120 docker pull -q "$PUBLIC_BASE" >/dev/null 2>&1; then
  export BASE_IMAGE="$PUBLIC_BASE"
else
  echo "compose-test: $PUBLIC_BASE cannot be pulled; building a stand-in from Debian's packages"
  BASE_IMAGE="$(timeout "$STEP_TIMEOUT_S" docker/standin-base.sh)" \
    || not_run "neither $PUBLIC_BASE nor a Debian stand-in base (debootstrap) can be had."
  export BASE_IMAGE
fi

COMPOSE=()
compose() { "${COMPOSE[@]}" "$@"; }

cleanup() {
  [ "${#COMPOSE[@]}" -gt 0 ] && compose down --volumes --remove-orphans >/dev/null 2>&1
  stop_started_dockerd
  rm -rf "$work"
}
trap cleanup EXIT

# A fresh `up` of the default services: the pipeline waits for its topic (no restarts)
# until a record to `events` creates it, then archives it.
prove() {
  local tool="$1" built="$2"
  read -r -a COMPOSE <<<"$tool"
  COMPOSE+=(-p "$PROJECT")
  if [ "$built" = "no" ]; then
    echo "compose-test: $tool: building the images on $BASE_IMAGE"
    timeout "$STEP_TIMEOUT_S" "${COMPOSE[@]}" build -q || return 1
  fi
  compose down --volumes --remove-orphans >/dev/null 2>&1 || true
  compose up -d --no-build || return 1
  local health=""
  for _ in $(seq 1 60); do
    health="$(docker inspect -f '{{.State.Health.Status}}' "$(compose ps -q broker)" 2>/dev/null || true)"
    [ "$health" = "healthy" ] && break
    sleep 2
  done
  [ "$health" = "healthy" ] || { echo "compose-test: $tool: the broker never became healthy"; compose logs --tail 50 broker; return 1; }

  local topic="compose-test-$$" got
  seq 1 100 | sed 's/^/record-/' | "$BROKER" client produce "$topic" -b 127.0.0.1:9092 || return 1
  got=$("$BROKER" client consume "$topic" -b 127.0.0.1:9092 --from-beginning -e | wc -l)
  [ "$got" -eq 100 ] || { echo "compose-test: $tool: consumed $got of 100 records"; return 1; }
  # The pipeline, started with the broker, waits for `events` (no topic yet) and says so.
  for _ in $(seq 1 60); do
    compose logs pipeline 2>&1 | grep -q "waiting: topic events" && break
    sleep 1
  done
  compose logs pipeline 2>&1 | grep -q "waiting: topic events" \
    || { echo "compose-test: $tool: the pipeline did not wait for events"; compose logs --tail 50 pipeline; return 1; }
  seq 1 100 | sed 's/^/record-/' | "$BROKER" client produce events -b 127.0.0.1:9092 || return 1

  for _ in $(seq 1 150); do
    # The archive is partitioned: archive/topic=<topic>/date=<day>/part-*.parquet.
    if compose exec -T pipeline \
      sh -c 'find /var/lib/pipeline/archive -name "*.parquet" | grep -q .' >/dev/null 2>&1; then
      local restarts
      restarts="$(docker inspect -f '{{.RestartCount}}' "$(compose ps -q pipeline)")"
      [ "$restarts" = "0" ] || { echo "compose-test: $tool: the pipeline restarted $restarts times"; return 1; }
      compose down --volumes --remove-orphans >/dev/null 2>&1
      echo "compose-test: $tool: passed (fresh up, 100 records through localhost:9092, archive written without restarts, base $BASE_IMAGE)"
      return 0
    fi
    sleep 2
  done
  echo "compose-test: $tool: the archive job wrote no Parquet within 300 s"
  compose logs --tail 50 pipeline
  return 1
}

built="no"
for tool in "${tools[@]}"; do
  start_s=$SECONDS
  prove "$tool" "$built" || exit 1
  built="yes"
  echo "compose-test: $tool took $((SECONDS - start_s)) s"
done
