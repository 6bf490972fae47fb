"""The supervisor's one HTTP port: every process's series labelled by node, and consumer
lag for every partition whichever process leads it (a busy port: tests/product/test_metrics.py,
the same HttpPort)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families

from broker.cluster.cluster_metrics import merge_process_families
from tests.client.cli_runner import run_cli
from tests.integration.broker_harness import BrokerProcess, broker_process

_SERVING = re.compile(r"serving metrics and the web console on http://[^:]+:(\d+)/")


def _cli(broker: BrokerProcess, *argv: str, stdin: bytes = b"") -> str:
    result = run_cli(["-b", broker.bootstrap, *argv], stdin)
    assert result.code == 0, result.err
    return result.out.decode()


def _produce(broker: BrokerProcess, partition: str, lines: bytes) -> None:
    _cli(broker, "produce", "orders", "-p", partition, stdin=lines)


def http_port_of(broker: BrokerProcess) -> int:
    """The supervisor's HTTP port, as it logs it."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = _SERVING.search(broker.log_text())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(broker.log_text())


def series(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


async def test_the_supervisor_serves_every_process_and_lag_of_every_partition(
    tmp_path: Path,
) -> None:
    overrides = {"process.count": "2", "metrics.port": "0"}
    with broker_process(tmp_path / "data", overrides) as broker:
        port = await trio.to_thread.run_sync(http_port_of, broker)
        await trio.to_thread.run_sync(
            lambda: _cli(broker, "topics", "create", "orders", "--partitions", "2")
        )
        for partition in ("0", "1"):
            await trio.to_thread.run_sync(_produce, broker, partition, b"a\nb\n")
        await trio.to_thread.run_sync(
            lambda: _cli(broker, "consume", "orders", "-g", "g", "--from-beginning", "-e")
        )
        for partition in ("0", "1"):
            await trio.to_thread.run_sync(_produce, broker, partition, b"c\nd\ne\n")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
            with trio.fail_after(30):
                while True:
                    text = (await http.get("/metrics")).text
                    lag = {
                        dict(k)["partition"]: v
                        for k, v in series(text, "kafka_server_consumergrouplag_lag").items()
                    }
                    if lag == {"0": 3.0, "1": 3.0}:
                        break
                    await trio.sleep(0.1)
            # The console beside it sees the whole cluster through the Kafka API.
            overview = (await http.get("/console/api/overview")).json()
            assert [b["node_id"] for b in overview["brokers"]] == [1, 2]
            assert sorted(b["leaders"] for b in overview["brokers"]) == [1, 1]
            group = (await http.get("/console/api/groups/g")).json()
            assert [(o["partition"], o["lag"]) for o in group["offsets"]] == [(0, 3), (1, 3)]
            groups = (await http.get("/console/api/groups")).json()["groups"]
            assert [g["group_id"] for g in groups] == ["g"]
        up = series(text, "broker_process_up")
        assert up == {(("node", "1"),): 1.0, (("node", "2"),): 1.0}
        led = series(text, "kafka_log_log_logendoffset")
        assert {dict(k)["node"] for k in led} == {"1", "2"}  # each leads one partition
        processes = {dict(k)["node"] for k in series(text, "process_open_fds")}
        assert processes == {"1", "2"}


def test_lag_is_joined_from_the_coordinator_and_the_leader() -> None:
    coordinator = (
        'kafka_server_consumergrouplag_committedoffset{group="g",partition="0",topic="t"} 4\n'
        'kafka_server_consumergrouplag_committedoffset{group="g",partition="1",topic="t"} 7\n'
        'kafka_server_consumergrouplag_lag{group="g",partition="0",topic="t"} 6\n'
        'kafka_log_log_logendoffset{partition="0",topic="t"} 10\n'
    )
    leader = 'kafka_log_log_logendoffset{partition="1",topic="t"} 9\n'
    families = {f.name: f for f in merge_process_families({1: coordinator, 2: leader, 3: None})}
    lag = {
        (s.labels["partition"], s.labels["node"]): s.value
        for s in families["kafka_server_consumergrouplag_lag"].samples
    }
    assert lag == {("0", "1"): 6.0, ("1", "1"): 2.0}
    up = {s.labels["node"]: s.value for s in families["broker_process_up"].samples}
    assert up == {"1": 1.0, "2": 1.0, "3": 0.0}
