"""`broker serve` as a user runs it: a separate process, real clients, signals.

These tests treat the broker as a black box on 127.0.0.1: kcat (Debian's,
linked against the system librdkafka) and confluent-kafka's AdminClient ask
it for Metadata, raw bytes are thrown at it, and it must shut down cleanly.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker_process(tmp_path_factory.mktemp("broker") / "data")
    yield process
    assert stop_broker_process(process) == 0, process.log_text()


def api_versions_v0(correlation_id: int = 7) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} bytes")
        data += chunk
    return data


def assert_answers_api_versions(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(api_versions_v0(correlation_id=99))
        frame = read_frame(sock)
    correlation_id, error_code = struct.unpack(">ih", frame[4:10])
    assert (correlation_id, error_code) == (99, 0)


@pytest.mark.interop
def test_kcat_lists_the_broker(broker: BrokerProcess) -> None:
    result = subprocess.run(
        ["kcat", "-L", "-b", broker.bootstrap, "-m", "10"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "1 brokers:" in result.stdout
    assert f"broker 1 at 127.0.0.1:{broker.port}" in result.stdout


@pytest.mark.interop
def test_confluent_admin_client_lists_topics(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    metadata = admin.list_topics(timeout=20)
    assert list(metadata.brokers) == [1]
    assert metadata.brokers[1].host == "127.0.0.1"
    assert metadata.brokers[1].port == broker.port
    assert metadata.cluster_id
    assert metadata.topics == {}


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_stall_or_crash_the_broker(
    broker: BrokerProcess, data: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        # The broker answers what parsed and then closes: reading must end.
        while sock.recv(65536):
            pass
    assert broker.process.poll() is None


@given(st.integers(0, 40), st.binary(min_size=1, max_size=8))
def test_mutated_valid_frames_never_stall_or_crash_the_broker(
    broker: BrokerProcess, position: int, replacement: bytes
) -> None:
    frame = bytearray(api_versions_v0() + api_versions_v0(8))
    frame[position : position + len(replacement)] = replacement
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(bytes(frame))
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass
    assert broker.process.poll() is None


def test_the_broker_still_answers_after_the_bad_input(broker: BrokerProcess) -> None:
    assert_answers_api_versions(broker.port)


def test_sigterm_shuts_down_cleanly_with_exit_0(tmp_path: Path) -> None:
    process = start_broker_process(tmp_path / "data")
    assert_answers_api_versions(process.port)
    assert stop_broker_process(process, signal.SIGTERM) == 0
    assert "shut down" in process.log_text()


def test_sigint_shuts_down_cleanly_with_exit_0(tmp_path: Path) -> None:
    process = start_broker_process(tmp_path / "data")
    assert stop_broker_process(process, signal.SIGINT) == 0


@pytest.mark.parametrize("processes", ["1", "0"], ids=["one-process", "a-process-per-core"])
def test_a_bind_failure_exits_non_zero_naming_the_address(tmp_path: Path, processes: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "broker",
                "serve",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"log.dirs={tmp_path / 'data'}",
                "--override",
                f"process.count={processes}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1
    failed = {int(p) for p in re.findall(r"failed to bind to 127\.0\.0\.1:(\d+)", result.stderr)}
    if processes == "1":
        assert failed == {port}, result.stderr[-3000:]
    else:
        # Process i binds port + i: the first to fail may be another process whose port
        # something else on the machine holds; each names its own address.
        count = len(os.sched_getaffinity(0))
        assert failed and failed <= set(range(port, port + count)), result.stderr[-3000:]
        assert "failed to start" in result.stderr, result.stderr[-3000:]


def test_an_invalid_config_value_is_rejected_naming_the_key(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "broker", "serve"),
            *("--override", "num.network.threads=0", "--override", "process.count=1"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "num.network.threads" in result.stderr


def test_the_default_config_file_starts_a_broker(tmp_path: Path) -> None:
    """config/server.properties, as `make run` uses it (port and data moved aside)."""
    process = start_broker_process(
        tmp_path / "data",
        {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "PLAINTEXT://127.0.0.1:0"},
        config_file=REPO / "config" / "server.properties",
    )
    try:
        assert_answers_api_versions(process.port)
        assert "config num.io.threads = 8" in process.log_text()
    finally:
        assert stop_broker_process(process) == 0


def test_overriding_the_port_of_the_shipped_config_advertises_the_new_port(
    tmp_path: Path,
) -> None:
    """`make run ARGS="--override listeners=..."` must not send clients to port 9092."""
    from confluent_kafka.admin import AdminClient

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = start_broker_process(
        tmp_path / "data",
        {"listeners": f"PLAINTEXT://127.0.0.1:{port}"},
        config_file=REPO / "config" / "server.properties",
    )
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        brokers = admin.list_topics(timeout=10).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", port)]
    finally:
        assert stop_broker_process(process) == 0


def test_a_second_broker_on_the_same_data_dir_fails_in_one_line(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    data_dir = broker.log_path.parent / broker.log_path.name.removesuffix("-broker.log")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "broker", "serve"),
            *("--override", "listeners=PLAINTEXT://127.0.0.1:0"),
            *("--override", f"log.dirs={data_dir}", "--override", "metrics.port=-1"),
            *("--override", "process.count=1"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if " INFO " not in line]
    assert len(errors) == 1, result.stderr
    assert f"log dir {data_dir} is in use by another broker process" in errors[0]
    assert_answers_api_versions(broker.port)


def test_broker_help_lists_every_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    for command in ("serve", "client", "pipeline"):
        assert f"    {command} " in result.stdout, result.stdout
