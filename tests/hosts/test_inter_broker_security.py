"""How brokers among hosts reach each other: the inter-broker listener and login as
Kafka validates them, the broker's own credentials from the listener's JAAS config, a
real logged-in TLS connection, and a leader's partitions spread over
`num.replica.fetchers` fetchers as Kafka's AbstractFetcherManager hashes them."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
import trio
import trio_util

from broker.client.connection import KafkaConnection
from broker.config import BrokerConfig, ConfigError
from broker.coordination.broker_registration import BrokerEndpoint, BrokerRegistration
from broker.coordination.partition_state_znodes import TopicAssignment
from broker.hosts.inter_broker_security import (
    BrokerConnector,
    BrokerUnreachable,
    InterBrokerSecurity,
)
from broker.hosts.partition_state_view import TopicState
from broker.hosts.replica_fetchers import ReplicaFetchers, fetcher_id
from broker.log.partition_log import PartitionLog
from broker.protocol.frame_buffers import FrameBuffers
from broker.protocol.messages import MetadataRequest
from broker.replication.leader_and_isr import LeaderAndIsr
from broker.replication.replica_fetcher import ReplicaFetcherSettings
from broker.replication.topic_partition import TopicPartition
from tests.integration.broker_harness import running_broker
from tests.replication.test_follower_partition_log import SMALL_SEGMENTS
from tests.security.helpers import make_certificates

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)
HOSTS = {
    "zookeeper.connect": "127.0.0.1:2181",
    "listeners": "CLIENTS://127.0.0.2:9092,BROKERS://127.0.0.2:9093",
    "listener.security.protocol.map": "CLIENTS:SASL_SSL,BROKERS:SASL_PLAINTEXT",
    "inter.broker.listener.name": "BROKERS",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "listener.name.brokers.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
}


def test_the_brokers_log_in_with_the_listeners_jaas_credentials_and_mechanism() -> None:
    security = InterBrokerSecurity.from_config(BrokerConfig(HOSTS))
    assert security.listener_name == "BROKERS"
    assert security.protocol == "SASL_PLAINTEXT"
    assert security.tls is None
    assert security.sasl is not None
    assert (security.sasl.mechanism, security.sasl.username) == ("SCRAM-SHA-512", "broker")
    assert security.sasl.password == "broker-secret"


def test_security_inter_broker_protocol_names_the_listener_of_that_protocol() -> None:
    config = BrokerConfig(
        {
            **{k: v for k, v in HOSTS.items() if k != "inter.broker.listener.name"},
            "listeners": "SASL_PLAINTEXT://127.0.0.2:9093",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        }
    )
    assert InterBrokerSecurity.from_config(config).listener_name == "SASL_PLAINTEXT"


def test_the_inter_broker_listener_name_and_protocol_are_mutually_exclusive() -> None:
    with pytest.raises(ConfigError, match="only one of"):
        BrokerConfig({**HOSTS, "security.inter.broker.protocol": "SASL_PLAINTEXT"})


def test_among_hosts_the_inter_broker_listener_must_be_advertised() -> None:
    # security.inter.broker.protocol's default names PLAINTEXT, which is not a listener.
    raw = {k: v for k, v in HOSTS.items() if k != "inter.broker.listener.name"}
    with pytest.raises(ConfigError, match="reach each other on listener PLAINTEXT"):
        BrokerConfig(raw)
    BrokerConfig({k: v for k, v in raw.items() if k != "zookeeper.connect"})  # alone: unused


@pytest.mark.parametrize(
    ("mechanism", "message"),
    [
        ("GSSAPI", "GSSAPI, Kafka's default, is not supported"),
        ("PLAIN", r"PLAIN must be among the inter-broker listener BROKERS's sasl\.enabled"),
    ],
)
def test_the_inter_broker_mechanism_must_be_enabled_on_the_listener(
    mechanism: str, message: str
) -> None:
    raw = {**HOSTS, "sasl.mechanism.inter.broker.protocol": mechanism}
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(raw)
    prefixed = {**raw, "listener.name.brokers.sasl.enabled.mechanisms": "GSSAPI"}
    with pytest.raises(ConfigError, match=r"listener\.name\.brokers\.sasl\.enabled"):
        BrokerConfig(prefixed)


def test_the_broker_needs_its_own_username_and_password_for_a_sasl_listener() -> None:
    missing = {k: v for k, v in HOSTS.items() if "jaas" not in k}
    key = r"^listener\.name\.brokers\.scram-sha-512\.sasl\.jaas\.config: the broker logs in"
    with pytest.raises(ConfigError, match=key):
        InterBrokerSecurity.from_config(BrokerConfig(missing))
    only_users = {
        **missing,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.brokers.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'user_alice="alice-secret";'
        ),
    }
    with pytest.raises(ConfigError, match=r"^listener\.name\.brokers\.plain\.sasl\.jaas\.config"):
        InterBrokerSecurity.from_config(BrokerConfig(only_users))


def test_a_plaintext_inter_broker_listener_needs_no_login() -> None:
    config = BrokerConfig(
        {"zookeeper.connect": "127.0.0.1:2181", "listeners": "PLAINTEXT://127.0.0.2:9092"}
    )
    assert InterBrokerSecurity.from_config(config) == InterBrokerSecurity("PLAINTEXT")


async def test_the_connector_logs_in_over_tls_and_again_before_the_session_ends(
    tmp_path: Path,
) -> None:
    certs = make_certificates(tmp_path / "tls")
    overrides = {
        "listeners": "BROKERS://127.0.0.1:0",
        "listener.security.protocol.map": "BROKERS:SASL_SSL",
        "listener.name.brokers.ssl.keystore.location": str(certs.server),
        "listener.name.brokers.ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.brokers.plain.sasl.jaas.config": PLAIN_JAAS,
        "inter.broker.listener.name": "BROKERS",
        "connections.max.reauth.ms": "1000",
    }
    async with running_broker(tmp_path / "data", overrides) as server:
        port = server.bound_port("BROKERS")
        security = InterBrokerSecurity.from_config(BrokerConfig(overrides))
        assert security.tls is not None and security.tls.check_hostname

        def live(listener: str) -> trio_util.AsyncValue[dict[int, BrokerRegistration]]:
            endpoint = BrokerEndpoint(listener, "SASL_SSL", "127.0.0.1", port)
            return trio_util.AsyncValue({1: BrokerRegistration(1, (endpoint,))})

        connector = BrokerConnector(security, live("BROKERS"))
        async with await connector.connect(1, "broker-2") as connection:
            metadata = await connection.request(MetadataRequest(topics=()), 9)
            assert [b.node_id for b in metadata.brokers] == [1]
            # Past the session's lifetime: it logs in again rather than being closed.
            await trio.sleep(1.05)
            again = await connection.request(MetadataRequest(topics=()), 9)
            assert [b.node_id for b in again.brokers] == [1]

        wrong = BrokerConnector(
            InterBrokerSecurity.from_config(
                BrokerConfig(
                    {
                        **overrides,
                        "listener.name.brokers.plain.sasl.jaas.config": PLAIN_JAAS.replace(
                            'password="broker-secret"', 'password="wrong"'
                        ),
                    }
                )
            ),
            live("BROKERS"),
        )
        with pytest.raises(BrokerUnreachable, match="broker 1: SASL login failed"):
            await wrong.connect(1, "broker-2")
        with pytest.raises(BrokerUnreachable, match="not registered on BROKERS"):
            await BrokerConnector(security, live("OTHER")).connect(1, "broker-2")


def test_fetcher_ids_follow_kafkas_hash_of_topic_and_partition() -> None:
    # Java: "hello".hashCode() = 99162322; 31 * 99162322 overflows to -1220935314.
    assert fetcher_id(TopicPartition("hello", 0), 4) == 1220935314 % 4 == 2
    assert fetcher_id(TopicPartition("hello", 1), 4) == 1220935313 % 4 == 1
    assert {fetcher_id(TopicPartition("t", p), 1) for p in range(10)} == {0}
    # Consecutive partitions of one topic land on consecutive fetchers.
    spread = Counter(fetcher_id(TopicPartition("events", p), 3) for p in range(30))
    assert sorted(spread) == [0, 1, 2] and set(spread.values()) == {10}


class WaitingConnector(BrokerConnector):
    """Notes each fetcher's connection and never completes one."""

    def __init__(self) -> None:
        super().__init__(InterBrokerSecurity("PLAINTEXT"), trio_util.AsyncValue({}))
        self.clients: set[str] = set()

    async def connect(
        self, node: int, client_id: str, frame_buffers: FrameBuffers | None = None
    ) -> KafkaConnection:
        self.clients.add(f"{node}:{client_id}")
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_leaders_partitions_are_spread_over_num_replica_fetchers(tmp_path: Path) -> None:
    partitions = range(8)
    image = {
        "events": TopicState(
            uuid.uuid4(),
            TopicAssignment("events", {p: (1, 2) for p in partitions}),
            {},
            {p: LeaderAndIsr(1, 0, (1, 2)) for p in partitions},
        )
    }

    def replica_log(topic: str, partition: int) -> PartitionLog:
        directory = tmp_path / f"{topic}-{partition}"
        return PartitionLog.load(
            topic,
            partition,
            directory,
            SMALL_SEGMENTS,
            clock=lambda: 0,
            clean=True,
            recovery_point=0,
            log_start_offset=0,
        )

    connector = WaitingConnector()
    live = trio_util.AsyncValue({1: BrokerRegistration(1, ())})
    fetchers = ReplicaFetchers(
        2,
        connector,
        trio_util.AsyncValue(image),
        replica_log,
        live,
        ReplicaFetcherSettings(),
        num_fetchers=3,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(fetchers.run)
        with trio.fail_after(10):
            while len(connector.clients) < 3:  # noqa: ASYNC110 - the fetchers' own tasks
                await trio.sleep(0.01)
        spread = {key: set(leader.epochs) for key, leader in fetchers._fetchers.items()}
        nursery.cancel_scope.cancel()
    expected: dict[tuple[int, int], set[TopicPartition]] = {}
    for p in partitions:
        tp = TopicPartition("events", p)
        expected.setdefault((1, fetcher_id(tp, 3)), set()).add(tp)
    assert spread == expected and len(spread) == 3
    assert connector.clients == {f"1:replica-fetcher-2-{i}" for i in range(3)}
