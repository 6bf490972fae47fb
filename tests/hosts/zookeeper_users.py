"""SCRAM users written into ZooKeeper before any broker starts, as
`kafka-configs.sh --zookeeper ... --alter --add-config 'SCRAM-SHA-256=[password=...]'
--entity-type users --entity-name <user>` writes them for Kafka 2.x's brokers."""

from __future__ import annotations

import os

from kazoo.client import KazooClient

from broker.coordination.config_znodes import (
    CONFIG_CHANGE_PREFIX,
    encode_config_change,
    encode_entity_config,
    encode_scram_credential,
    sanitize,
    user_config_path,
)
from broker.security.scram_credentials import MECHANISM_BY_NAME, ScramCredential


def create_users(zookeeper_connect: str, mechanism: str, users: dict[str, str]) -> None:
    info = MECHANISM_BY_NAME[mechanism]
    hosts, slash, chroot = zookeeper_connect.partition("/")
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=15.0)
    root = f"/{chroot}".rstrip("/") if slash else ""
    try:
        for user, password in users.items():
            credential = ScramCredential.from_password(info, password, os.urandom(24), 4096)
            config = {mechanism: encode_scram_credential(credential)}
            client.create(
                root + user_config_path(user), encode_entity_config(config), makepath=True
            )
            client.create(
                root + CONFIG_CHANGE_PREFIX,
                encode_config_change(f"users/{sanitize(user)}"),
                sequence=True,
                makepath=True,
            )
    finally:
        client.stop()
        client.close()
