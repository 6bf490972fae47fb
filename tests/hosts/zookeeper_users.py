"""SCRAM users written into ZooKeeper before any broker starts, by `broker
zookeeper-configs` as `kafka-configs.sh --zookeeper ... --alter --add-config
'SCRAM-SHA-256=[password=...]' --entity-type users --entity-name <user>` writes them for
Kafka 2.x's brokers."""

from __future__ import annotations

from broker.hosts.zookeeper_configs_command import main


def create_users(zookeeper_connect: str, mechanism: str, users: dict[str, str]) -> None:
    for user, password in users.items():
        arguments = ["--zookeeper", zookeeper_connect, "--alter", "--entity-type", "users"]
        arguments += ["--entity-name", user, "--add-config", f"{mechanism}=[password={password}]"]
        if main(arguments) != 0:
            raise RuntimeError(f"broker zookeeper-configs could not create {user}")
