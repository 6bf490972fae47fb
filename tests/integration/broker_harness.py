"""Start real brokers for tests: in-process on Trio, or as a `broker serve` process.

Every broker listens on 127.0.0.1 with an ephemeral port and keeps its data in
the test's temporary directory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import attrs
import trio

from broker.client.connection import KafkaConnection
from broker.config import BrokerConfig
from broker.server import KafkaServer
from broker.wiring.deployment import Deployment

_LISTENING = re.compile(r"listening on (\w+)://[^ ]*:(\d+)")
_REGISTERED = re.compile(r"node (\d+) registered in the cluster at \{'\w+': \('[^']*', (\d+)\)")
_CLUSTER_STARTED = "broker processes started"


def base_config(data_dir: Path, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    raw = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "metrics.port": "-1",
    }
    raw.update(overrides or {})
    return BrokerConfig(raw)


@asynccontextmanager
async def running_broker(
    data_dir: Path,
    overrides: Mapping[str, str] | None = None,
    *,
    deployment: Callable[[BrokerConfig], Deployment] | None = None,
) -> AsyncIterator[KafkaServer]:
    """A broker in this Trio run (deployed alone, or as `deployment` makes it from its
    config); shut down gracefully on exit."""
    config = base_config(data_dir, overrides)
    server = KafkaServer(config, deployment=None if deployment is None else deployment(config))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield server
        finally:
            server.shutdown()
            with trio.move_on_after(10):
                await server.stopped.wait()
            nursery.cancel_scope.cancel()


async def connect(
    server: KafkaServer, listener: str | None = None, client_id: str = "test"
) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", server.bound_port(listener), client_id)


@attrs.define
class BrokerProcess:
    process: subprocess.Popen[str]
    ports: dict[str, int]
    log_path: Path

    @property
    def port(self) -> int:
        return next(iter(self.ports.values()))

    @property
    def bootstrap(self) -> str:
        """The broker's address; for a cluster, every process's (as last registered, so a
        restarted process's new ephemeral port is included)."""
        nodes = self.node_ports()
        if nodes:
            return ",".join(f"127.0.0.1:{port}" for port in nodes.values())
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def node_ports(self) -> dict[int, int]:
        """A cluster's nodes and the port of their first listener, as last registered."""
        return {int(m.group(1)): int(m.group(2)) for m in _REGISTERED.finditer(self.log_text())}


def start_broker_process(
    data_dir: Path,
    overrides: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
    config_file: Path | None = None,
    log_level: str | None = None,
) -> BrokerProcess:
    """`python -m broker serve` as a user runs it; waits until it logs its listeners
    (with `process.count` > 1: until the supervisor reports every process started).
    Tests run one process unless they set `process.count`. The start-up deadline is
    generous because three processes on a loaded 2-core CI machine took over 30 s; it
    costs nothing when the broker starts in time."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "metrics.port": "-1",
        "process.count": "1",
    }
    settings.update(overrides or {})
    args = [sys.executable, "-m", "broker", "serve"]
    if config_file is not None:
        args.append(str(config_file))
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    if log_level is not None:
        args += ["--log-level", log_level]
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.parent / f"{data_dir.name}-broker.log"
    log_file = log_path.open("w", encoding="utf-8")
    process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    log_file.close()
    expected = len(settings["listeners"].split(","))
    ready = _CLUSTER_STARTED if int(settings["process.count"]) != 1 else "started"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text()
        ports = {m.group(1): int(m.group(2)) for m in _LISTENING.finditer(text)}
        if len(ports) >= expected and ready in text:
            return BrokerProcess(process, ports, log_path)
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}:\n{log_path.read_text()}")
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"broker did not start within {timeout_s}s:\n{log_path.read_text()}")


def stop_broker_process(
    broker: BrokerProcess, sig: int = signal.SIGTERM, timeout_s: float = 20.0
) -> int:
    if broker.process.poll() is None:
        broker.process.send_signal(sig)
        try:
            broker.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            broker.process.kill()
            broker.process.wait()
    return broker.process.returncode


@contextmanager
def broker_process(
    data_dir: Path, overrides: Mapping[str, str] | None = None
) -> Iterator[BrokerProcess]:
    broker = start_broker_process(data_dir, overrides)
    try:
        yield broker
    finally:
        stop_broker_process(broker)


def env_without_proxies() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
