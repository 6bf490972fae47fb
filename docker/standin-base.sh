#!/usr/bin/env bash
# Builds a stand-in for the images' public base (python:3.11-slim-bookworm) from
# Debian's own packages, for machines that reach Debian's archive and PyPI but no
# container registry. Usage: docker/standin-base.sh [TAG]; prints the tag.
#
# The stand-in is Debian bookworm (minbase) with Debian's Python 3.11 and pip, the
# `python` command, and this machine's CA bundle (so pip inside a build trusts what
# the host trusts, e.g. a TLS-inspecting proxy's CA). Needs root and debootstrap.
# Built once per tag: an existing image is reused.
set -euo pipefail

TAG="${1:-trio-kafka-base:bookworm-standin}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "$TAG"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "standin-base: debootstrap is missing" >&2; exit 1; }

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-pip,python-is-python3,ca-certificates \
  bookworm "$rootfs" "$MIRROR" >&2
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
# Debian's pip refuses system-wide installs (PEP 668); the image is the environment.
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
  --change 'CMD ["/bin/bash"]' - "$TAG" >&2
echo "$TAG"
