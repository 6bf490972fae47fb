"""An idle broker reads idle, however often its gauges are read."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.server import KafkaServer
from tests.integration.broker_harness import running_broker


def gauge(server: KafkaServer, name: str) -> float:
    values = [s.values["value"] for s in server.metrics.snapshot() if s.name == name]
    assert len(values) == 1, name
    return values[0]


async def test_an_idle_broker_reads_near_one_on_its_idle_gauges(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        await trio.sleep(0.5)
        for name in ("RequestHandlerAvgIdlePercent", "NetworkProcessorAvgIdlePercent"):
            first, second = gauge(server, name), gauge(server, name)
            assert first > 0.9, (name, first)
            assert second > 0.9, (name, second)
