"""Brokers started with `zookeeper.connect`: registered with their bound ports, one
controller; and a ZooKeeper that cannot be reached stops start-up in one line."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from kazoo.client import KazooClient

from broker.coordination.broker_registration import DuplicateBrokerId
from broker.coordination.kazoo_store import KazooCoordinationStore, ZooKeeperSettings
from tests.integration.broker_harness import broker_process, running_broker

LISTENING = re.compile(r"listening on PLAINTEXT://[^ ]*:(\d+)")
WAIT_S = 30


async def test_brokers_register_their_bound_listeners_and_elect_one_controller(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    def overrides(node_id: int) -> dict[str, str]:
        return {
            "node.id": str(node_id),
            "zookeeper.connect": zookeeper_connect,
            "broker.rack": f"rack-{node_id}",
        }

    async with (
        running_broker(tmp_path / "one", overrides(1)) as one,
        running_broker(tmp_path / "two", overrides(2)) as two,
    ):
        assert one.membership is not None and two.membership is not None
        with trio.fail_after(WAIT_S):
            for server in (one, two):
                assert server.membership is not None
                await server.membership.live_brokers.brokers.wait_value(lambda b: len(b) == 2)
                await server.membership.election.view.wait_value(lambda v: v.controller_id > 0)
        live = one.membership.live_brokers.brokers.value
        for server in (one, two):
            endpoint = live[server.node_id].endpoints[0]
            assert (endpoint.host, endpoint.port) == ("127.0.0.1", server.bound_port())
            assert live[server.node_id].rack == f"rack-{server.node_id}"
        assert [one.membership.election.is_controller, two.membership.election.is_controller] in (
            [True, False],
            [False, True],
        )
        # A third broker claiming node.id 1 stops: an OSError, which `broker serve`
        # reports in one line with a non-zero exit, as an unreachable ZooKeeper.
        refused = pytest.RaisesExc(DuplicateBrokerId, match=r"^node\.id 1 is already registered")
        with pytest.RaisesGroup(refused, flatten_subgroups=True), trio.fail_after(WAIT_S):
            async with running_broker(tmp_path / "three", overrides(1)):
                await trio.sleep_forever()
        assert issubclass(DuplicateBrokerId, OSError)
        assert one.membership.election.view.value.controller_id > 0

        store = KazooCoordinationStore(ZooKeeperSettings(zookeeper_connect))
        await store.connect()
        try:
            node = await store.get("/brokers/ids/2")
            assert node is not None
            assert json.loads(node.data)["port"] == two.bound_port()
        finally:
            await store.close()


def test_an_unreachable_zookeeper_stops_start_up_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path),
        "process.count": "1",
        "metrics.port": "-1",
        "zookeeper.connect": f"127.0.0.1:{port}/kafka",
        "zookeeper.connection.timeout.ms": "1500",
    }
    overrides = [arg for key, value in settings.items() for arg in ("--override", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "broker", "serve", *overrides],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    assert f"zookeeper.connect=127.0.0.1:{port}/kafka" in errors[0]
    assert "zookeeper.connection.timeout.ms=1500" in errors[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "__topics.json").exists()  # failed before the log was opened


async def test_every_process_of_a_host_registers_as_its_own_broker(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    overrides = {"process.count": "2", "node.id": "11", "zookeeper.connect": zookeeper_connect}
    with broker_process(tmp_path, overrides) as broker:
        store = KazooCoordinationStore(ZooKeeperSettings(zookeeper_connect))
        await store.connect()
        try:
            with trio.fail_after(WAIT_S):
                while len(await store.children("/brokers/ids")) < 2:  # noqa: ASYNC110 - ZooKeeper's state
                    await trio.sleep(0.1)
            assert await store.children("/brokers/ids") == ["11", "12"]
            # Each a whole broker with its own ephemeral port, registered as bound.
            listening = {int(port) for port in LISTENING.findall(broker.log_text())}
            registered = set()
            for node_id in (11, 12):
                node = await store.get(f"/brokers/ids/{node_id}")
                assert node is not None
                registered.add(json.loads(node.data)["port"])
            assert registered == listening and len(registered) == 2
            controller = await store.get("/controller")
            assert controller is not None
            assert json.loads(controller.data)["brokerid"] in (11, 12)
        finally:
            await store.close()


def test_a_log_dir_of_another_cluster_stops_start_up_with_one_line(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=elsewhere\nnode.id=1\n")
    hosts, _, chroot = zookeeper_connect.partition("/")
    store = KazooClient(hosts=hosts)  # the chroot is the broker's to create
    store.start(WAIT_S)
    try:
        cluster_id = b'{"version":"1","id":"this-cluster"}'
        store.create(f"/{chroot}/cluster/id", cluster_id, makepath=True)
    finally:
        store.stop()
        store.close()
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path),
        "process.count": "1",
        "metrics.port": "-1",
        "zookeeper.connect": zookeeper_connect,
    }
    overrides = [arg for key, value in settings.items() for arg in ("--override", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "broker", "serve", *overrides],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    assert (
        "The Cluster ID this-cluster doesn't match stored clusterId elsewhere in meta.properties"
        in errors[0]
    )
    assert "Traceback" not in result.stderr
