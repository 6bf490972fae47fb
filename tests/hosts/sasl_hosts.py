"""Three `broker serve` hosts on 127.0.0.2-4 whose only listener is SASL_PLAINTEXT with
SCRAM-SHA-256 and an authorizer, `super.users=User:admin`, the brokers logging in to each
other as admin; the users are written into ZooKeeper before the hosts start, as
`kafka-configs.sh --zookeeper` writes them before Kafka's brokers start."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import trio

from broker.client.security_config import SASL_PLAINTEXT, SaslCredentials, SecurityConfig
from broker.client.session import ClientSession
from broker.protocol.messages import MetadataRequest
from tests.hosts.host_processes import ADDRESSES, Host, Hosts, free_port, wait_until
from tests.hosts.zookeeper_users import create_users

MECHANISM = "SCRAM-SHA-256"
SASL_SETTINGS = {
    "sasl.enabled.mechanisms": MECHANISM,
    "security.inter.broker.protocol": SASL_PLAINTEXT,
    "sasl.mechanism.inter.broker.protocol": MECHANISM,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="admin" password="admin-secret";'
    ),
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "num.network.threads": "1",
    "num.io.threads": "2",
}


def ask_as(host: Host, request: Any, user: str, password: str, version: int = -1) -> Any:
    """One request to this one host, logged in as `user` (the highest version both
    implement unless given)."""
    security = SecurityConfig(SASL_PLAINTEXT, SaslCredentials(MECHANISM, user, password))

    async def run() -> Any:
        with trio.fail_after(15):
            async with await ClientSession.open(host.bootstrap, security=security) as session:
                chosen = version if version >= 0 else session.version_for(request.API_KEY)
                return await session.request(request, chosen)

    return trio.run(run)


@contextlib.contextmanager
def sasl_hosts(
    tmp_path: Path,
    zookeeper_connect: str,
    users: Mapping[str, str],
    settings: Mapping[str, str],
) -> Iterator[Hosts]:
    """The hosts, every one registered, with `users` (admin among them) in ZooKeeper."""
    create_users(zookeeper_connect, MECHANISM, dict(users))
    hosts = Hosts({})
    for node_id, (address, rack) in ADDRESSES.items():
        port = free_port(address)
        overrides = {
            "listeners": f"{SASL_PLAINTEXT}://{address}:{port}",
            "node.id": str(node_id),
            "broker.rack": rack,
            "zookeeper.connect": zookeeper_connect,
            "cluster.id": "sasl-hosts",
            **SASL_SETTINGS,
            **settings,
        }
        data_dir = tmp_path / f"host-{node_id}"
        hosts.hosts[node_id] = Host(node_id, address, port, data_dir, overrides)
    first = hosts.hosts[min(hosts.hosts)]
    try:
        hosts.start()
        wait_until(
            "every host registered",
            lambda: (
                len(ask_as(first, MetadataRequest(topics=None), "admin", users["admin"]).brokers)
                == 3
            ),
        )
        yield hosts
    finally:
        hosts.stop_all()
