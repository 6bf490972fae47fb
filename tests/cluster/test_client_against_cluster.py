"""`broker client` against a cluster of three processes: leaders and coordinators routed."""

from __future__ import annotations

import contextlib
import json
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from broker.client.group_description import OFFSETS_HEADER
from broker.cluster.placement import coordinator_shard
from tests.client.cli_runner import run_cli
from tests.integration.broker_harness import (
    BrokerProcess,
    env_without_proxies,
    start_broker_process,
    stop_broker_process,
)

PROCESSES = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    started = start_broker_process(
        tmp_path_factory.mktemp("cluster") / "data",
        {"process.count": str(PROCESSES), "group.initial.rebalance.delay.ms": "0"},
    )
    try:
        yield started
    finally:
        assert stop_broker_process(started) == 0


@pytest.fixture
def bootstrap(cluster: BrokerProcess) -> str:
    """One address (process 0's): the client finds the other processes through Metadata."""
    return cluster.bootstrap.split(",")[0]


def client(bootstrap: str, *args: str, stdin: str = "") -> str:
    result = subprocess.run(
        [sys.executable, "-m", "broker", "client", *args, "--bootstrap-server", bootstrap],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def ok(bootstrap: str, *args: str, stdin: bytes = b"") -> str:
    """In this process: no interpreter start per command."""
    result = run_cli([*args, "--bootstrap-server", bootstrap], stdin)
    assert result.code == 0, result.err
    return result.out.decode()


def test_the_test_client_produces_and_consumes_across_every_leader(bootstrap: str) -> None:
    client(bootstrap, "topics", "create", "spread", "--partitions", "6")
    lines = "".join(f"key-{i}\tvalue-{i}\n" for i in range(300))
    client(bootstrap, "produce", "spread", "-K", "\\t", stdin=lines)
    out = client(bootstrap, "consume", "spread", "--from-beginning", "-e", "-f", "%p %s\n")
    records = [line.split(" ") for line in out.splitlines()]
    assert sorted(value for _, value in records) == sorted(f"value-{i}" for i in range(300))
    assert len({partition for partition, _ in records}) == 6
    # A group: joined and committed at its coordinator, wherever that is.
    grouped = client(
        bootstrap, "consume", "spread", "-g", "readers", "--from-beginning", "-e", "-f", "%s\n"
    )
    assert len(grouped.splitlines()) == 300
    again = client(bootstrap, "consume", "spread", "-g", "readers", "-e", "-f", "%s\n")
    assert again == ""  # the group's committed offsets are at the end


def group_on(process: int, prefix: str) -> str:
    """A group id that process `process` coordinates (not the bootstrap's, process 0)."""
    return next(
        name
        for name in (f"{prefix}-{n}" for n in range(1000))
        if coordinator_shard(name, PROCESSES) == process
    )


def test_groups_are_described_and_listed_wherever_their_coordinator_is(
    cluster: BrokerProcess, bootstrap: str
) -> None:
    first, second = group_on(1, "lag"), group_on(2, "lag")
    ok(bootstrap, "topics", "create", "lagged", "--partitions", str(PROCESSES))
    metadata = json.loads(ok(bootstrap, "metadata", "lagged", "--json"))
    assert len({p["leader_id"] for p in metadata["topics"][0]["partitions"]}) == PROCESSES
    for partition in range(PROCESSES):
        ok(bootstrap, "produce", "lagged", "-p", str(partition), stdin=b"a\nb\n")
    for group in (first, second):
        ok(bootstrap, "consume", "lagged", "-g", group, "--from-beginning", "-e")
    ok(bootstrap, "produce", "lagged", "-p", "0", stdin=b"c\n")
    ok(bootstrap, "produce", "lagged", "-p", "2", stdin=b"c\nd\ne\n")

    listed = [line.split("\t")[0] for line in ok(bootstrap, "groups", "list").splitlines()]
    assert {first, second} <= set(listed) and len(listed) == len(set(listed))
    # Committed offsets from the coordinator, log end offsets from each partition's leader.
    table = ok(bootstrap, "groups", "describe", first).splitlines()
    assert table[1].split() == list(OFFSETS_HEADER)
    assert [row.split() for row in table[2:]] == [
        [first, "lagged", "0", "2", "3", "1", "-", "-", "-"],
        [first, "lagged", "1", "2", "2", "0", "-", "-", "-"],
        [first, "lagged", "2", "2", "5", "3", "-", "-", "-"],
    ]
    both = json.loads(ok(bootstrap, "groups", "describe", second, first, "--json"))
    assert [g["group_id"] for g in both] == [second, first]
    assert [row["lag"] for row in both[0]["offsets"]] == [1, 0, 3]
    state = json.loads(ok(bootstrap, "groups", "describe", second, "--state", "--json"))
    assert state[0]["coordinator"]["node_id"] == sorted(cluster.node_ports())[2]
    assert state[0]["group_state"] == "Empty"


def test_a_replication_factor_is_refused_naming_the_registered_brokers(bootstrap: str) -> None:
    refused = run_cli(["topics", "create", "copied", "--replication-factor", "2", "-b", bootstrap])
    assert refused.code == 1
    assert "INVALID_REPLICATION_FACTOR (Replication factor 2 is not supported: 3 broker(s)" in (
        refused.err
    )
    beyond = run_cli(["topics", "create", "copied", "--replication-factor", "4", "-b", bootstrap])
    assert "cannot be reached because only 3 broker(s) are registered" in beyond.err


_AS_FROM_A_TERMINAL = (
    "import runpy, signal, sys; "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'broker'; "
    "runpy.run_module('broker', run_name='__main__', alter_sys=True)"
)


def test_ctrl_c_ends_a_consumer_quietly_with_exit_status_130(bootstrap: str) -> None:
    ok(bootstrap, "topics", "create", "interrupted", "--partitions", str(PROCESSES))
    ok(bootstrap, "produce", "interrupted", stdin=b"first\n")
    # Started as from a terminal: SIGINT neither blocked nor ignored, whatever the test
    # process (an xdist worker, after other tests) passes on to its children.
    command = [sys.executable, "-c", _AS_FROM_A_TERMINAL, "client", "consume", "interrupted"]
    command += ["--from-beginning", "--bootstrap-server", bootstrap]
    env = env_without_proxies() | {"PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as consumer:
        assert consumer.stdout is not None and consumer.stderr is not None
        # Fetching from every leader at once when the record is printed, and after it.
        with selectors.DefaultSelector() as selector:
            selector.register(consumer.stdout, selectors.EVENT_READ)
            assert selector.select(timeout=60), "the consumer printed nothing"
        assert consumer.stdout.readline() == b"first\n"
        time.sleep(0.3)
        consumer.send_signal(signal.SIGINT)
        try:
            code = consumer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # Popen's exit would wait for ever (and pytest-timeout then kill the worker).
            # SIGABRT makes faulthandler print where every thread of it is.
            consumer.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                consumer.wait(timeout=10)
            consumer.kill()
            stuck = consumer.stderr.read().decode(errors="replace")
            raise AssertionError(f"the consumer ran on 60 s after Ctrl-C:\n{stuck}") from None
        stderr = consumer.stderr.read()
    assert (code, stderr) == (130, b"")
