"""A real ZooKeeper server for the tests: Debian's jars, a free port, a tmp data dir.

One standalone server per test session (the JVM takes seconds to start); each
test gets its own chroot in `zookeeper_connect`, so tests never see each
other's znodes. `make setup` installs the `zookeeper` package when missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from kazoo.client import KazooClient

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # its manifest lists the other jars
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
START_ATTEMPTS = 3


@attrs.frozen
class ZooKeeperServer:
    host: str
    port: int
    process: subprocess.Popen[bytes]
    data_dir: Path

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def four_letter_word(host: str, port: int, word: bytes, timeout_s: float = 2.0) -> bytes:
    """ZooKeeper's admin commands over its client port (`ruok` answers `imok`)."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer


def _write_config(data_dir: Path, host: str, port: int) -> Path:
    config = data_dir / "zoo.cfg"
    config.write_text(
        "\n".join(
            [
                "tickTime=500",
                f"dataDir={data_dir / 'data'}",
                f"clientPort={port}",
                f"clientPortAddress={host}",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,cons,wchp,wchc",
                # Kafka's zookeeper.session.timeout.ms (18 s) must be within the bounds.
                "minSessionTimeout=1000",
                "maxSessionTimeout=60000",
                "",
            ]
        )
    )
    return config


class ZooKeeperExited(RuntimeError):
    """The server stopped before answering (its free port taken meanwhile, most likely)."""


def start_zookeeper(
    data_dir: Path, host: str = "127.0.0.1", port: int | None = None
) -> ZooKeeperServer:
    """A server on `port` (a free one when None) keeping its data in `data_dir`."""
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JAR.exists():
        raise RuntimeError("ZooKeeper or Java is missing: run `make setup`")
    port = _free_port(host) if port is None else port
    config = _write_config(data_dir, host, port)
    log_path = data_dir / "zookeeper.log"
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            [
                java,
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                f"-Dzookeeper.log.dir={data_dir}",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                str(ZOOKEEPER_JAR),
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(config),
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = ZooKeeperServer(host, port, process, data_dir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ZooKeeperExited(f"ZooKeeper exited with {process.returncode}: see {log_path}")
        try:
            if four_letter_word(host, port, b"ruok") == b"imok":
                return server
        except OSError:
            pass
        time.sleep(0.1)
    stop_zookeeper(server)
    raise RuntimeError(f"ZooKeeper did not answer ruok within {START_TIMEOUT_S} s")


def stop_zookeeper(server: ZooKeeperServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(STOP_TIMEOUT_S)


def restart_zookeeper(server: ZooKeeperServer, down_s: float = 0.0) -> ZooKeeperServer:
    """The same server stopped and started again on its port and data (its sessions
    survive when clients reconnect within their timeout, as with a real restart)."""
    stop_zookeeper(server)
    time.sleep(down_s)
    return start_zookeeper(server.data_dir, server.host, server.port)


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
            break
        except ZooKeeperExited:
            if attempt == START_ATTEMPTS:
                raise
    try:
        yield server
    finally:
        stop_zookeeper(server)


@pytest.fixture
def zookeeper_connect(zookeeper_server: ZooKeeperServer) -> str:
    """`zookeeper.connect` with a chroot of this test's own (created by the broker)."""
    return f"{zookeeper_server.hosts}/test-{uuid.uuid4().hex[:12]}"


def expire_session(hosts: str, session: tuple[int, bytes]) -> None:
    """End a client's session from outside, as a broker stopped past its timeout sees it.

    ZooKeeper's own way: a second client attaches to the session (its id and password)
    and closes it; the first client finds it expired when it reconnects.
    """
    intruder = KazooClient(hosts=hosts, client_id=session)
    intruder.start(timeout=30)
    intruder.stop()
    intruder.close()
