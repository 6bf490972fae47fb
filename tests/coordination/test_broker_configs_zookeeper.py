"""Dynamic broker configs of hosts on a real ZooKeeper, where Kafka 2.x keeps them: a
default set through broker 1 reaches broker 2 through `/config/brokers/<default>` and its
change notification, and broker 2 applies it (its I/O pool resized); a broker's own layer
stays its own; a per-broker file is copied into a ZooKeeper that holds none."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from broker.config import BrokerConfig
from broker.dynamic_broker_config_store import DynamicBrokerConfigStore, LayerChange
from broker.handlers.broker_configs import BrokerConfigs
from broker.hosts.zookeeper_broker_configs import ZooKeeperBrokerConfigStore
from tests.coordination.test_security_stores_zookeeper import WAIT_S, connected, eventually


class ResizedServer:
    """The pools a broker config changes, as counts (the server's collaborator here)."""

    def __init__(self, node_id: int, log_dir: Path) -> None:
        self.node_id = node_id
        self.config = BrokerConfig(
            {"log.dirs": str(log_dir), "num.io.threads": "4", "num.network.threads": "2"}
        )
        self.io_threads = 4

    async def resize_network_threads(self, new_count: int) -> None:
        pass

    def resize_io_threads(self, new_count: int) -> None:
        self.io_threads = new_count

    def update_connection_quotas(self, config: BrokerConfig) -> None:
        pass


async def test_a_default_set_through_one_broker_is_applied_by_another(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    # Broker 1 had a default and a layer of its own in its file before hosts.
    (tmp_path / "one").mkdir()
    DynamicBrokerConfigStore(tmp_path / "one").update_sync(
        LayerChange(1, {"leader.replication.throttled.rate": "1000000"})
    )
    stores = [await connected(zookeeper_connect) for _ in range(2)]
    try:
        servers = [ResizedServer(1, tmp_path / "one"), ResizedServer(2, tmp_path / "two")]
        config_stores = [
            ZooKeeperBrokerConfigStore(tmp_path / name, store, server.node_id)
            for name, store, server in zip(("one", "two"), stores, servers, strict=True)
        ]
        configs = [
            BrokerConfigs(server, store)
            for server, store in zip(servers, config_stores, strict=True)
        ]
        async with trio.open_nursery() as nursery:
            for store, broker_configs in zip(config_stores, configs, strict=True):
                await nursery.start(store.following(broker_configs, 30.0).run)
            one, two = configs
            assert one.per_broker == {
                "leader.replication.throttled.rate": "1000000"
            }  # copied from the file
            assert two.per_broker == {}

            await one.alter("", {"num.io.threads": "6", "max.connections": "1000"})
            with trio.fail_after(WAIT_S):
                await eventually("broker 2 applies the default", lambda: servers[1].io_threads == 6)
            assert two.cluster_default == {"num.io.threads": "6", "max.connections": "1000"}
            assert two.value("num.io.threads") == "6" and servers[0].io_threads == 6

            # Broker 2's own layer wins over the default there, and only there.
            await two.alter("2", {"num.io.threads": "8"})
            await one.alter("", {"max.connections": "2000"}, ["num.io.threads"])
            with trio.fail_after(WAIT_S):
                await eventually(
                    "broker 2 follows the default's deletion",
                    lambda: two.cluster_default == {"max.connections": "2000"},
                )
                # Broker 1 applied its own write at once, but a notification it was still
                # following (broker 2's layer) may re-apply the default read before that
                # write: eventually consistent, as Kafka's change notifications are.
                await eventually(
                    "broker 1 follows its own deletion",
                    lambda: (servers[0].io_threads, servers[1].io_threads) == (4, 8),
                )
            assert one.per_broker == {"leader.replication.throttled.rate": "1000000"}
            nursery.cancel_scope.cancel()

        found = await stores[0].get("/config/brokers/<default>")
        assert found is not None
        assert json.loads(found.data) == {"version": 1, "config": {"max.connections": "2000"}}
        assert await stores[0].get("/config/brokers/2") is not None
    finally:
        for session in stores:
            await session.close()
