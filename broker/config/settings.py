"""Typed, frozen settings groups: what subsystems read instead of key strings.

Each field names its key in the table (`broker/config/table.py`) and takes the value
the table parsed and validated, so a subsystem sees `config.network.num_io_threads`
(an int) and never `"num.io.threads"`. The groups are built once per `BrokerConfig`
(the composition root builds the config; dynamic updates build a new one). Values
computed from several keys (retention by ms, minutes or hours; a listener's override
of a broker-wide key) are computed here, once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

import attrs

from broker.config.table import CONFIG_DEFS


class ConfigValues(Protocol):
    """What the groups are built from (BrokerConfig): typed values by key."""

    def value(self, key: str) -> object: ...

    def effective_key(self, listener: str, key: str, mechanism: str = "") -> str: ...


class Keyed(NamedTuple):
    """A per-listener value with the key it came from, for error messages that name
    the line the operator must fix (`listener.name.ssl.ssl.keystore.location: ...`)."""

    key: str
    value: Any


def _k(key: str) -> dict[str, str]:
    """The metadata of a field read from `key` (which must be in the table)."""
    assert key in CONFIG_DEFS, key
    return {"key": key}


S = TypeVar("S")


def _typed(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def build(cls: type[S], lookup: Callable[[str], object], **derived: object) -> S:
    """`cls` with each keyed field read through `lookup` and the others from `derived`."""
    values = dict(derived)
    for field in attrs.fields(cls):  # type: ignore[arg-type]
        key = field.metadata.get("key")
        if key is not None:
            values[field.name] = _typed(lookup(key))
    return cls(**values)


def keys_of(cls: type[Any]) -> dict[str, str]:
    """Field name -> key, for every keyed field of a settings group."""
    return {f.name: f.metadata["key"] for f in attrs.fields(cls) if "key" in f.metadata}


@attrs.frozen(slots=True)
class ServerSettings:
    node_id: int = attrs.field(metadata=_k("node.id"))
    cluster_id: str | None = attrs.field(metadata=_k("cluster.id"))
    rack: str | None = attrs.field(metadata=_k("broker.rack"))
    shutdown_timeout_ms: int = attrs.field(metadata=_k("broker.shutdown.timeout.ms"))
    metrics_port: int = attrs.field(metadata=_k("metrics.port"))
    console_enable: bool = attrs.field(metadata=_k("console.enable"))


@attrs.frozen(slots=True)
class ListenerSettings:
    """A listener's values of the per-listener network keys (its override, else the
    broker-wide value, as Kafka's valuesWithPrefixOverride)."""

    num_network_threads: int = attrs.field(metadata=_k("num.network.threads"))
    max_connections: int = attrs.field(metadata=_k("max.connections"))
    max_connection_creation_rate: int = attrs.field(metadata=_k("max.connection.creation.rate"))
    sasl_server_max_receive_size: int = attrs.field(metadata=_k("sasl.server.max.receive.size"))


@attrs.frozen(slots=True)
class NetworkSettings:
    num_network_threads: int = attrs.field(metadata=_k("num.network.threads"))
    num_io_threads: int = attrs.field(metadata=_k("num.io.threads"))
    queued_max_requests: int = attrs.field(metadata=_k("queued.max.requests"))
    queued_max_request_bytes: int = attrs.field(metadata=_k("queued.max.request.bytes"))
    socket_request_max_bytes: int = attrs.field(metadata=_k("socket.request.max.bytes"))
    socket_send_buffer_bytes: int = attrs.field(metadata=_k("socket.send.buffer.bytes"))
    socket_receive_buffer_bytes: int = attrs.field(metadata=_k("socket.receive.buffer.bytes"))
    socket_listen_backlog_size: int = attrs.field(metadata=_k("socket.listen.backlog.size"))
    connections_max_idle_ms: int = attrs.field(metadata=_k("connections.max.idle.ms"))
    socket_request_read_timeout_ms: int = attrs.field(metadata=_k("socket.request.read.timeout.ms"))
    control_plane_listener_name: str | None = attrs.field(
        metadata=_k("control.plane.listener.name")
    )
    connection_failed_authentication_delay_ms: int = attrs.field(
        metadata=_k("connection.failed.authentication.delay.ms")
    )
    max_connections: int = attrs.field(metadata=_k("max.connections"))
    max_connection_creation_rate: int = attrs.field(metadata=_k("max.connection.creation.rate"))
    max_connections_per_ip: int = attrs.field(metadata=_k("max.connections.per.ip"))
    max_connections_per_ip_overrides: Mapping[str, int] = attrs.field()
    inter_broker_listener_name: str = attrs.field()
    listener: Callable[[str], ListenerSettings] = attrs.field(eq=False, repr=False)
    """The settings of one listener (by name, any case)."""


@attrs.frozen(slots=True)
class QuotaSettings:
    window_size_seconds: int = attrs.field(metadata=_k("quota.window.size.seconds"))
    window_num: int = attrs.field(metadata=_k("quota.window.num"))


@attrs.frozen(slots=True)
class LogSettings:
    auto_create_topics_enable: bool = attrs.field(metadata=_k("auto.create.topics.enable"))
    num_partitions: int = attrs.field(metadata=_k("num.partitions"))
    default_replication_factor: int = attrs.field(metadata=_k("default.replication.factor"))
    delete_topic_enable: bool = attrs.field(metadata=_k("delete.topic.enable"))
    cleaner_enable: bool = attrs.field(metadata=_k("log.cleaner.enable"))
    num_recovery_threads_per_data_dir: int = attrs.field(
        metadata=_k("num.recovery.threads.per.data.dir")
    )
    retention_check_interval_ms: int = attrs.field(metadata=_k("log.retention.check.interval.ms"))
    flush_interval_ms: int | None = attrs.field(metadata=_k("log.flush.interval.ms"))
    retention_ms: int = attrs.field()
    """log.retention.ms, else minutes, else hours (Kafka's precedence); < 0: forever."""
    roll_ms: int = attrs.field()
    """log.roll.ms, else log.roll.hours."""


@attrs.frozen(slots=True)
class CleanerSettings:
    threads: int = attrs.field(metadata=_k("log.cleaner.threads"))
    io_max_bytes_per_second: float = attrs.field(metadata=_k("log.cleaner.io.max.bytes.per.second"))
    backoff_ms: int = attrs.field(metadata=_k("log.cleaner.backoff.ms"))
    dedupe_buffer_size: int = attrs.field(metadata=_k("log.cleaner.dedupe.buffer.size"))
    worker: str = attrs.field(metadata=_k("log.cleaner.worker"))


@attrs.frozen(slots=True)
class GroupSettings:
    initial_rebalance_delay_ms: int = attrs.field(metadata=_k("group.initial.rebalance.delay.ms"))
    min_session_timeout_ms: int = attrs.field(metadata=_k("group.min.session.timeout.ms"))
    max_session_timeout_ms: int = attrs.field(metadata=_k("group.max.session.timeout.ms"))
    offsets_retention_minutes: int = attrs.field(metadata=_k("offsets.retention.minutes"))
    offset_metadata_max_bytes: int = attrs.field(metadata=_k("offset.metadata.max.bytes"))
    offsets_retention_check_interval_ms: int = attrs.field(
        metadata=_k("offsets.retention.check.interval.ms")
    )
    consumer_session_timeout_ms: int = attrs.field(metadata=_k("group.consumer.session.timeout.ms"))
    consumer_heartbeat_interval_ms: int = attrs.field(
        metadata=_k("group.consumer.heartbeat.interval.ms")
    )
    consumer_assignors: tuple[str, ...] = attrs.field(metadata=_k("group.consumer.assignors"))
    offsets_topic_replication_factor: int = attrs.field(
        metadata=_k("offsets.topic.replication.factor")
    )


@attrs.frozen(slots=True)
class TransactionSettings:
    max_timeout_ms: int = attrs.field(metadata=_k("transaction.max.timeout.ms"))
    id_expiration_ms: int = attrs.field(metadata=_k("transactional.id.expiration.ms"))
    abort_timed_out_transaction_cleanup_interval_ms: int = attrs.field(
        metadata=_k("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    )
    remove_expired_transaction_cleanup_interval_ms: int = attrs.field(
        metadata=_k("transaction.remove.expired.transaction.cleanup.interval.ms")
    )
    state_log_replication_factor: int = attrs.field(
        metadata=_k("transaction.state.log.replication.factor")
    )
    state_log_min_isr: int = attrs.field(metadata=_k("transaction.state.log.min.isr"))


@attrs.frozen(slots=True)
class ListenerSecuritySettings:
    """A listener's TLS and SASL values, each with the key it was read from."""

    ssl_keystore_type: Keyed = attrs.field(metadata=_k("ssl.keystore.type"))
    ssl_keystore_location: Keyed = attrs.field(metadata=_k("ssl.keystore.location"))
    ssl_keystore_certificate_chain: Keyed = attrs.field(
        metadata=_k("ssl.keystore.certificate.chain")
    )
    ssl_keystore_key: Keyed = attrs.field(metadata=_k("ssl.keystore.key"))
    ssl_key_password: Keyed = attrs.field(metadata=_k("ssl.key.password"))
    ssl_truststore_location: Keyed = attrs.field(metadata=_k("ssl.truststore.location"))
    ssl_truststore_certificates: Keyed = attrs.field(metadata=_k("ssl.truststore.certificates"))
    ssl_client_auth: Keyed = attrs.field(metadata=_k("ssl.client.auth"))
    ssl_enabled_protocols: Keyed = attrs.field(metadata=_k("ssl.enabled.protocols"))
    ssl_cipher_suites: Keyed = attrs.field(metadata=_k("ssl.cipher.suites"))
    ssl_principal_mapping_rules: Keyed = attrs.field(metadata=_k("ssl.principal.mapping.rules"))
    ssl_endpoint_identification_algorithm: Keyed = attrs.field(
        metadata=_k("ssl.endpoint.identification.algorithm")
    )
    sasl_enabled_mechanisms: Keyed = attrs.field(metadata=_k("sasl.enabled.mechanisms"))
    plain_jaas_config: Keyed = attrs.field()
    """PLAIN's JAAS config: only a listener's (or its PLAIN mechanism's) counts."""
    connections_max_reauth_ms: Mapping[str, int] = attrs.field()
    """Per enabled mechanism, the session lifetime (0: no re-authentication)."""
    jaas_config: Callable[[str], Keyed] = attrs.field(eq=False, repr=False)
    """A mechanism's JAAS config on this listener (`listener.name.<l>.<mechanism>.
    sasl.jaas.config`, else the listener's, else `sasl.jaas.config`): where the broker's
    own inter-broker credentials are."""


@attrs.frozen(slots=True)
class SecuritySettings:
    authorizer_class_name: str = attrs.field(metadata=_k("authorizer.class.name"))
    super_users: str | None = attrs.field(metadata=_k("super.users"))
    allow_everyone_if_no_acl_found: bool = attrs.field(
        metadata=_k("allow.everyone.if.no.acl.found")
    )
    sasl_enabled_mechanisms: tuple[str, ...] = attrs.field(metadata=_k("sasl.enabled.mechanisms"))
    sasl_mechanism_inter_broker_protocol: str = attrs.field(
        metadata=_k("sasl.mechanism.inter.broker.protocol")
    )
    listener: Callable[[str], ListenerSecuritySettings] = attrs.field(eq=False, repr=False)
    """The TLS and SASL settings of one listener (by name)."""


@attrs.frozen(slots=True)
class ClusterSettings:
    process_count: int = attrs.field(metadata=_k("process.count"))
    metadata_poll_interval_ms: int = attrs.field(metadata=_k("cluster.metadata.poll.interval.ms"))
    load_report_interval_ms: int = attrs.field(metadata=_k("cluster.load.report.interval.ms"))
    load_window_ms: int = attrs.field(metadata=_k("cluster.load.window.ms"))
    process_listener_ports: tuple[str, ...] = attrs.field(metadata=_k("process.listener.ports"))
    process_advertised_listener_ports: tuple[str, ...] = attrs.field(
        metadata=_k("process.advertised.listener.ports")
    )
    advertised_listeners: str | None = attrs.field(metadata=_k("advertised.listeners"))
    zookeeper_connect: str | None = attrs.field(metadata=_k("zookeeper.connect"))
    zookeeper_session_timeout_ms: int = attrs.field(metadata=_k("zookeeper.session.timeout.ms"))
    zookeeper_connection_timeout_ms: int | None = attrs.field(
        metadata=_k("zookeeper.connection.timeout.ms")
    )

    @property
    def processes(self) -> int:
        """`process.count` resolved: 0 means one process per core this process may use."""
        if self.process_count > 0:
            return self.process_count
        return max(len(os.sched_getaffinity(0)), 1)


@attrs.frozen(slots=True)
class ReplicationSettings:
    """Replicas on other hosts (they take effect with zookeeper.connect)."""

    replica_lag_time_max_ms: int = attrs.field(metadata=_k("replica.lag.time.max.ms"))
    replica_fetch_backoff_ms: int = attrs.field(metadata=_k("replica.fetch.backoff.ms"))
    replica_fetch_wait_max_ms: int = attrs.field(metadata=_k("replica.fetch.wait.max.ms"))
    replica_fetch_max_bytes: int = attrs.field(metadata=_k("replica.fetch.max.bytes"))
    num_replica_fetchers: int = attrs.field(metadata=_k("num.replica.fetchers"))
    auto_leader_rebalance_enable: bool = attrs.field(metadata=_k("auto.leader.rebalance.enable"))
    leader_imbalance_per_broker_percentage: int = attrs.field(
        metadata=_k("leader.imbalance.per.broker.percentage")
    )
    leader_imbalance_check_interval_seconds: int = attrs.field(
        metadata=_k("leader.imbalance.check.interval.seconds")
    )
    controlled_shutdown_enable: bool = attrs.field(metadata=_k("controlled.shutdown.enable"))
    controlled_shutdown_max_retries: int = attrs.field(
        metadata=_k("controlled.shutdown.max.retries")
    )
    controlled_shutdown_retry_backoff_ms: int = attrs.field(
        metadata=_k("controlled.shutdown.retry.backoff.ms")
    )
    leader_replication_throttled_rate: int = attrs.field(
        metadata=_k("leader.replication.throttled.rate")
    )
    follower_replication_throttled_rate: int = attrs.field(
        metadata=_k("follower.replication.throttled.rate")
    )
    replication_quota_window_num: int = attrs.field(metadata=_k("replication.quota.window.num"))
    replication_quota_window_size_seconds: int = attrs.field(
        metadata=_k("replication.quota.window.size.seconds")
    )


SETTINGS_GROUPS: tuple[type[Any], ...] = (
    ServerSettings,
    ListenerSettings,
    NetworkSettings,
    QuotaSettings,
    LogSettings,
    CleanerSettings,
    GroupSettings,
    TransactionSettings,
    ListenerSecuritySettings,
    SecuritySettings,
    ClusterSettings,
    ReplicationSettings,
)


def listener_settings(source: ConfigValues, listener: str) -> ListenerSettings:
    return build(ListenerSettings, lambda key: source.value(source.effective_key(listener, key)))


def listener_security_settings(source: ConfigValues, listener: str) -> ListenerSecuritySettings:
    def keyed(key: str, mechanism: str = "") -> Keyed:
        effective = source.effective_key(listener, key, mechanism)
        return Keyed(effective, _typed(source.value(effective)))

    mechanisms = keyed("sasl.enabled.mechanisms").value
    jaas_key = source.effective_key(listener, "sasl.jaas.config", "PLAIN")
    jaas = source.value(jaas_key) if jaas_key != "sasl.jaas.config" else None
    reauth: dict[str, int] = {}
    for mechanism in mechanisms:
        value = keyed("connections.max.reauth.ms", mechanism).value
        assert isinstance(value, int)
        reauth[mechanism] = value
    return build(
        ListenerSecuritySettings,
        keyed,
        plain_jaas_config=Keyed(jaas_key, jaas),
        connections_max_reauth_ms=reauth,
        jaas_config=lambda mechanism: keyed("sasl.jaas.config", mechanism),
    )
