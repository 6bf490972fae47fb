"""The Prometheus endpoint: Kafka-derived names, live values, valid exposition."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from broker.http_port import find_http_port as find_exporter
from broker.metrics import MetricsRegistry
from broker.metrics_http import RegistryCollector, exposition
from broker.protocol.messages import ApiVersionsRequest
from broker.server import KafkaServer
from tests.integration.broker_harness import connect, running_broker

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _get(url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def scrape(server: KafkaServer, path: str = "/metrics") -> tuple[int, str]:
    exporter = find_exporter(server.services)
    assert exporter is not None and exporter.bound_port
    url = f"http://127.0.0.1:{exporter.bound_port}{path}"
    return await trio.to_thread.run_sync(_get, url)


async def samples(server: KafkaServer) -> Samples:
    status, text = await scrape(server)
    assert status == 200
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            # Every series names its node (one process here): compared without it.
            assert s.name == "broker_process_up" or s.labels.get("node") == "1", s
            labels = {k: v for k, v in s.labels.items() if k != "node"}
            out[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


async def test_request_counters_count_each_answered_request(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "0"}) as server:
        name = "kafka_network_requestmetrics_requests_total"
        before = value(await samples(server), name, request="ApiVersions", version="3") or 0
        connection = await connect(server)
        async with connection:
            for _ in range(3):
                await connection.request(
                    ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
                )
        with trio.fail_after(5):
            while True:
                after = value(await samples(server), name, request="ApiVersions", version="3")
                if after == before + 3:
                    break
                await trio.sleep(0.05)


async def test_latency_summaries_have_quantiles_count_and_sum(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "0"}) as server:
        connection = await connect(server)
        async with connection:
            await connection.request(
                ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
            )
        with trio.fail_after(5):
            while True:
                found = await samples(server)
                base = "kafka_network_requestmetrics_totaltimems"
                count = value(found, base + "_count", request="ApiVersions")
                if count:
                    break
                await trio.sleep(0.05)
        assert value(found, base, request="ApiVersions", quantile="0.5") is not None
        assert value(found, base, request="ApiVersions", quantile="0.99") is not None
        total = value(found, base + "_sum", request="ApiVersions")
        assert total is not None and total >= 0


async def test_idle_gauges_are_fractions_and_the_handler_idle_ratio_moves(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, {"metrics.port": "0"}) as server:
        network = "kafka_network_socketserver_networkprocessoravgidlepercent"
        handlers = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
        first = await samples(server)
        await trio.sleep(0.3)
        # Handler idle time is recorded when a request ends a wait.
        connection = await connect(server)
        async with connection:
            for _ in range(3):
                await connection.request(
                    ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
                )
        second = await samples(server)
        for name in (network, handlers):
            for found in (first, second):
                fraction = value(found, name)
                assert fraction is not None and 0.0 <= fraction <= 1.0, (name, fraction)
        before, after = value(first, handlers), value(second, handlers)
        assert before is not None and after is not None and after > before


async def test_connection_count_gauge_sees_open_connections(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "0"}) as server:
        name = "kafka_server_socket_server_metrics_connection_count"

        def open_connections(found: Samples) -> float:
            return sum(
                v
                for (n, labels), v in found.items()
                if n == name and ("listener", "PLAINTEXT") in labels
            )

        first = await connect(server)
        second = await connect(server)
        async with first, second:
            await first.request(
                ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
            )
            await second.request(
                ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
            )
            assert open_connections(await samples(server)) == 2
        with trio.fail_after(5):
            while open_connections(await samples(server)) != 0:  # noqa: ASYNC110 - asks the broker over the wire: no event to wait on
                await trio.sleep(0.05)


async def test_process_metrics_use_prometheus_standard_names(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "0"}) as server:
        before = await samples(server)
        connection = await connect(server)
        async with connection:
            during = await samples(server)
    assert (value(before, "process_cpu_seconds_total") or 0) > 0
    assert (value(before, "process_resident_memory_bytes") or 0) > 10 * 2**20
    fds_before = value(before, "process_open_fds")
    fds_during = value(during, "process_open_fds")
    assert fds_before is not None and fds_during is not None
    assert fds_during >= fds_before + 1  # the accepted socket
    assert (value(before, "process_max_fds") or 0) >= fds_before


async def test_other_paths_are_not_found_and_the_root_points_to_metrics(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "0"}) as server:
        assert (await scrape(server, "/nope"))[0] == 404
        status, body = await scrape(server, "/")
        assert status == 200 and "/metrics" in body


async def test_metrics_port_minus_one_disables_the_endpoint(tmp_path: Path) -> None:
    async with running_broker(tmp_path, {"metrics.port": "-1"}) as server:
        assert find_exporter(server.services) is None


async def test_a_busy_metrics_port_leaves_the_broker_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_broker(tmp_path / "a", {"metrics.port": "0"}) as first:
        exporter = find_exporter(first.services)
        assert exporter is not None and exporter.bound_port
        overrides = {"metrics.port": str(exporter.bound_port)}
        async with running_broker(tmp_path / "b", overrides) as second:
            connection = await connect(second)
            async with connection:
                response = await connection.request(
                    ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
                )
            assert response.error_code == 0
            assert find_exporter(second.services) is not None
    refused = [r.getMessage() for r in caplog.records if "cannot bind" in r.getMessage()]
    assert len(refused) == 1 and str(exporter.bound_port) in refused[0], refused


def test_names_follow_the_kafka_derived_rule() -> None:
    registry = MetricsRegistry(clock=lambda: 0.0)
    registry.meter("kafka.network", "RequestMetrics", "RequestsPerSec", request="Produce").mark(2)
    registry.meter("kafka.network", "Acceptor", "AcceptorBlockedPercent", listener="X").mark()
    registry.histogram("kafka.network", "RequestMetrics", "TotalTimeMs", request="Fetch").update(4)
    registry.gauge(
        "kafka.server",
        "socket-server-metrics",
        "connection-count",
        lambda: 7,
        listener="PLAINTEXT",
        networkProcessor="0",
    )
    families = {f.name: f for f in RegistryCollector(registry).collect()}
    assert families["kafka_network_requestmetrics_requests"].type == "counter"
    assert families["kafka_network_acceptor_acceptorblockedpercent"].type == "counter"
    assert families["kafka_network_requestmetrics_totaltimems"].type == "summary"
    gauge = families["kafka_server_socket_server_metrics_connection_count"]
    assert gauge.type == "gauge"
    assert [(s.labels, s.value) for s in gauge.samples] == [
        ({"listener": "PLAINTEXT", "networkProcessor": "0"}, 7.0)
    ]
    text = exposition(registry).decode()
    assert 'kafka_network_requestmetrics_requests_total{request="Produce"} 2.0' in text
    assert 'kafka_network_requestmetrics_totaltimems{quantile="0.5",request="Fetch"} 4.0' in text
    parsed = {f.name for f in text_string_to_metric_families(text)}
    assert "kafka_network_requestmetrics_totaltimems_max" in parsed
