#!/usr/bin/env bash
# Checks the README's set-up on a clean Debian: a fresh clone of HEAD in a new
# bookworm container with only make, git and python3-venv added (what the README
# says a machine needs), then `make setup`, which must install everything else
# (the pinned Python packages, Debian's kcat and Java) and leave a working broker.
#
# Uses the engine and base image as docker/compose-test.sh does (a Debian stand-in
# where no registry answers); without an engine it says NOT RUN and exits 0
# (SETUP_CHECK_REQUIRED=1 makes that a failure).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "setup-check: NOT RUN: no Docker engine answers here."
  [ "${SETUP_CHECK_REQUIRED:-0}" = "1" ] && exit 1
  exit 0
fi
if docker image inspect debian:bookworm >/dev/null 2>&1 \
  || timeout 120 docker pull -q debian:bookworm >/dev/null 2>&1; then
  base=debian:bookworm
else
  base="$(docker/standin-base.sh)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q . "$work/clone"
cat >"$work/check.sh" <<'INNER'
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make git python3-venv >/dev/null
cp -r /src /work && cd /work
! command -v kcat >/dev/null && ! command -v java >/dev/null
make setup
command -v kcat >/dev/null && command -v java >/dev/null
test -e /usr/share/java/zookeeper.jar
.venv/bin/broker --help >/dev/null
.venv/bin/python -c "import pyspark, confluent_kafka, scramp, trustme, kazoo"
INNER
# The host's CA settings travel, for networks whose TLS is inspected by a proxy.
env_args=()
for name in SSL_CERT_FILE REQUESTS_CA_BUNDLE; do
  [ -n "${!name:-}" ] && env_args+=(-e "$name=${!name}")
done
echo "setup-check: make setup in a clean $base container"
docker run --rm "${env_args[@]}" -v "$work/clone:/src:ro" -v "$work/check.sh:/check.sh:ro" \
  "$base" bash /check.sh
echo "setup-check: passed (venv, pinned packages, kcat, Java and ZooKeeper installed by make setup)"
