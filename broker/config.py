"""Broker configuration under Kafka's own key names and server.properties format.

Operators bring Kafka configs and Kafka muscle memory, so keys, defaults,
validation messages and the .properties syntax follow Kafka (spec §8). Values
are kept as the strings the operator wrote and parsed on access through the
typed definitions in `CONFIG_DEFS`; validation happens once, when the config is
built, so a bad value stops the broker at start-up rather than at first use.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from broker.config_catalogue import TOPIC_CONFIGS
from broker.config_error import ConfigError
from broker.net.endpoint import (
    DEFAULT_PROTOCOL_MAP,
    SECURITY_PROTOCOLS,
    Endpoint,
    parse_listeners,
    parse_protocol_map,
    split_list,
    validate_listener_uniqueness,
)
from broker.security.authorizer import AUTHORIZER_CLASS_NAMES

__all__ = [
    "CONFIG_DEFS",
    "PER_LISTENER_KEYS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "load_config",
    "parse_properties",
]

logger = logging.getLogger("broker.config")

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

CONFIG_TYPES = ("int", "long", "bool", "string", "list", "password", "double")
DYNAMIC_MODES = ("read-only", "per-broker", "cluster-wide")
HIDDEN = "[hidden]"

Validator = Callable[[Any], None]
"""Raises ValueError with a message (without the key) when a parsed value is invalid."""


# --------------------------------------------------------------------------- validators


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> None:
        if value is not None and value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}, got {value}")

    return check


def one_of(*choices: str) -> Validator:
    def check(value: Any) -> None:
        if value is not None and value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")

    return check


def _zookeeper_connect_validator(value: Any) -> None:
    """host:port[,host:port...][/chroot], as Kafka's zookeeper.connect."""
    if value is None:
        return
    hosts = str(value).split("/", 1)[0]
    for entry in hosts.split(","):
        host, _, port = entry.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port[,host:port...][/chroot], got {value!r}")


def each_one_of(*choices: str) -> Validator:
    def check(value: Any) -> None:
        for item in value or ():
            if item not in choices:
                raise ValueError(f"entries must be among {', '.join(choices)}, got {item!r}")

    return check


def non_empty_list(value: Any) -> None:
    if value is not None and not value:
        raise ValueError("must not be empty")


def _protocol_map_validator(value: Any) -> None:
    try:
        parse_protocol_map(value or "")
    except ConfigError as exc:
        raise ValueError(str(exc).split(": ", 1)[1]) from None


def _authorizer_class_validator(value: Any) -> None:
    if value and value not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(
            f"unsupported authorizer {value!r}; use one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        )


def _per_ip_overrides_validator(value: Any) -> None:
    parse_ip_overrides(value or "")


def parse_ip_overrides(value: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host-or-ip:count,...`. The host part may
    itself contain colons (IPv6), so the count is taken after the last colon."""
    result: dict[str, int] = {}
    for entry in split_list(value):
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ValueError(f"entry {entry!r} is not of the form host:count")
        try:
            limit = int(count.strip())
        except ValueError:
            raise ValueError(f"entry {entry!r} has a non-integer count") from None
        if limit < 0:
            raise ValueError(f"entry {entry!r} has a negative count")
        result[host] = limit
    return result


# --------------------------------------------------------------------------- definitions


@attrs.frozen
class ConfigDef:
    """The definition of one supported key; `dynamic` records Kafka's update mode
    so that dynamic config can later refuse read-only changes with Kafka's rules."""

    name: str
    type: str
    default: object
    doc: str
    dynamic: str = "read-only"
    validator: Validator | None = None

    def __attrs_post_init__(self) -> None:
        if self.type not in CONFIG_TYPES:
            raise AssertionError(f"bad type {self.type} for {self.name}")
        if self.dynamic not in DYNAMIC_MODES:
            raise AssertionError(f"bad dynamic mode {self.dynamic} for {self.name}")

    def parse(self, raw: str) -> object:
        """Convert a string value to this definition's type, the way Kafka's
        ConfigDef.parseType does (surrounding whitespace is insignificant)."""
        text = raw.strip()
        if self.type in ("int", "long"):
            try:
                value: object = int(text)
            except ValueError:
                raise ConfigError(f"{self.name}: expected an integer, got {raw!r}") from None
            low, high = (INT_MIN, INT_MAX) if self.type == "int" else (LONG_MIN, LONG_MAX)
            if not low <= int(text) <= high:
                raise ConfigError(f"{self.name}: {text} does not fit in a 32/64-bit {self.type}")
        elif self.type == "double":
            try:
                value = float(text)
            except ValueError:
                raise ConfigError(f"{self.name}: expected a number, got {raw!r}") from None
            if math.isnan(value):
                raise ConfigError(f"{self.name}: expected a number, got {raw!r}")
        elif self.type == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ConfigError(f"{self.name}: expected true or false, got {raw!r}")
            value = lowered == "true"
        elif self.type == "list":
            value = split_list(text)
        else:
            value = text
        self.validate(value)
        return value

    def validate(self, value: object) -> None:
        if self.validator is None:
            return
        try:
            self.validator(value)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None


def _d(
    name: str,
    type_: str,
    default: object,
    doc: str,
    dynamic: str = "read-only",
    validator: Validator | None = None,
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, dynamic, validator)


# fmt: off
_DEFS: list[ConfigDef] = [
    # ---- listeners (spec §1.1)
    _d("listeners", "string", "PLAINTEXT://:9092", "Comma-separated NAME://host:port listeners; empty host binds the wildcard, port 0 an ephemeral port.", "per-broker"),
    _d("advertised.listeners", "string", None, "Endpoints published in Metadata; defaults to listeners. Must not use 0.0.0.0.", "per-broker"),
    _d("listener.security.protocol.map", "string", DEFAULT_PROTOCOL_MAP, "NAME:PROTOCOL pairs mapping each listener name to its security protocol.", "per-broker", _protocol_map_validator),
    _d("inter.broker.listener.name", "string", None, "Listener used between brokers; it is the protected listener for connection quotas."),
    _d("security.inter.broker.protocol", "string", "PLAINTEXT", "Security protocol between brokers; names the inter-broker listener when inter.broker.listener.name is unset.", "read-only", one_of(*SECURITY_PROTOCOLS)),
    _d("control.plane.listener.name", "string", None, "ZooKeeper-mode control plane listener; accepted for compatibility, ignored."),
    _d("early.start.listeners", "string", None, "Listeners started before the authorizer is ready; accepted for compatibility."),
    # ---- identity
    _d("node.id", "int", 1, "This broker's id (alias: broker.id).", "read-only", at_least(0)),
    _d("broker.id", "int", None, "Legacy alias of node.id.", "read-only", at_least(0)),
    _d("cluster.id", "string", None, "Cluster id; generated and persisted with the log when unset." ),
    _d("process.roles", "list", [], "KRaft roles; accepted for compatibility (this broker is always a single combined node).", "read-only", each_one_of("broker", "controller")),
    _d("controller.listener.names", "string", None, "KRaft controller listeners; accepted for compatibility, ignored."),
    _d("controller.quorum.voters", "list", [], "KRaft quorum voters; accepted for compatibility, ignored."),
    # ---- a cluster of processes on one machine (docs/cluster.md)
    _d("process.count", "int", 0, "Broker processes to run under one supervisor, each a node with its own node.id (node.id + i) and ports (each listener's port + i); 0 (the default) means one per core this process may run on (a single process on one core); 1 runs a single process without a supervisor (ours, not Kafka's).", "read-only", at_least(0)),
    _d("cluster.metadata.poll.interval.ms", "int", 50, "How often each process of a cluster checks the shared metadata store's version for changes (ours, not Kafka's).", "read-only", at_least(1)),
    _d("process.listener.ports", "list", [], "Explicit ports per listener for the processes of a cluster, NAME:FIRST-LAST (process i binds the i-th); a listener not named binds its port + i (ours, not Kafka's).", "read-only"),
    _d("process.advertised.listener.ports", "list", [], "Like process.listener.ports for the ports advertised to clients (e.g. those a container platform publishes); a listener not named follows advertised.listeners' port + i (ours, not Kafka's).", "read-only"),
    # ---- brokers on several hosts, through ZooKeeper (docs/replication.md)
    _d("zookeeper.connect", "string", None, "ZooKeeper servers as host:port[,host:port...][/chroot] (the chroot is created if missing); when set, the broker registers in /brokers/ids and takes part in the controller election. Unset: the single-host cluster, no ZooKeeper.", "read-only", _zookeeper_connect_validator),
    _d("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout: a broker silent this long loses its registration (and the controllership).", "read-only", at_least(1)),
    _d("zookeeper.connection.timeout.ms", "int", None, "How long to wait for a ZooKeeper connection at start-up; defaults to zookeeper.session.timeout.ms.", "read-only", at_least(1)),
    _d("broker.rack", "string", None, "The rack of this broker, published in its /brokers/ids registration."),
    # ---- socket server (spec §3, §4, §6)
    _d("num.network.threads", "int", 3, "Processors per listener (also listener.name.X.num.network.threads).", "cluster-wide", at_least(1)),
    _d("num.io.threads", "int", 8, "Request handler tasks.", "cluster-wide", at_least(1)),
    _d("queued.max.requests", "int", 500, "Capacity of the request queue; a full queue blocks processors.", "read-only", at_least(1)),
    _d("queued.max.request.bytes", "long", -1, "Memory pool for received requests, held from a request's size prefix until its response is written; waiting connections are served in order, small requests from the pool's last tenth. Above 0: the pool's size, at least socket.request.max.bytes. <= 0 (the default) is not unbounded as in Kafka: the pool is then max(socket.request.max.bytes, 104857600) bytes. Fetch responses waiting to be written get a second budget of the same size (each granted at least 1 MiB or one batch)."),
    _d("socket.request.max.bytes", "int", 104857600, "Largest request frame; bigger frames close the connection.", "read-only", at_least(1)),
    _d("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF of accepted sockets; -1 keeps the OS default."),
    _d("socket.receive.buffer.bytes", "int", 102400, "SO_RCVBUF of listening sockets; -1 keeps the OS default."),
    _d("socket.listen.backlog.size", "int", 50, "Listen backlog (the kernel may cap it).", "read-only", at_least(1)),
    _d("max.connections", "int", INT_MAX, "Broker-wide connection limit (also listener.name.X.max.connections); exceeding it blocks the acceptor.", "cluster-wide", at_least(0)),
    _d("max.connection.creation.rate", "int", INT_MAX, "Broker-wide new connections per second (also per listener); exceeding it delays accepts.", "cluster-wide", at_least(0)),
    _d("max.connections.per.ip", "int", INT_MAX, "Connections per client IP; 0 is only allowed with overrides.", "cluster-wide", at_least(0)),
    _d("max.connections.per.ip.overrides", "string", "", "Per host or IP limits: host:count,ip:count.", "cluster-wide", _per_ip_overrides_validator),
    _d("connections.max.idle.ms", "long", 600000, "Idle connections are closed after this long; negative disables."),
    _d("socket.request.read.timeout.ms", "long", 300000, "A request must be received whole within this long of its first byte, else the connection is closed and counted (read-timeout-connections-killed); the clock restarts when the memory pool admits the frame. About 3x what a 100 MiB frame takes at 10 Mbit/s. Ours, not Kafka's; <= 0 disables.", "read-only"),
    _d("connection.failed.authentication.delay.ms", "int", 100, "Delay before closing a connection that failed authentication; must be < connections.max.idle.ms.", "read-only", at_least(0)),
    _d("connections.max.reauth.ms", "long", 0, "SASL session lifetime; 0 disables re-authentication.", "read-only", at_least(0)),
    _d("sasl.server.max.receive.size", "int", 524288, "Largest frame accepted before and during SASL authentication."),
    # ---- TLS and SASL listeners (issue 11); each also as listener.name.<l>.<key>
    _d("ssl.keystore.type", "string", "PEM", "Format of the key store; only PEM is supported (Kafka's default is JKS).", "read-only", one_of("PEM")),
    _d("ssl.keystore.location", "string", None, "PEM file holding the listener's private key and certificate chain."),
    _d("ssl.keystore.certificate.chain", "password", None, "The certificate chain in PEM, inline (instead of ssl.keystore.location)."),
    _d("ssl.keystore.key", "password", None, "The private key in PEM, inline (with ssl.keystore.certificate.chain)."),
    _d("ssl.key.password", "password", None, "Password of an encrypted private key."),
    _d("ssl.truststore.type", "string", "PEM", "Format of the trust store; only PEM is supported (Kafka's default is JKS).", "read-only", one_of("PEM")),
    _d("ssl.truststore.location", "string", None, "PEM file of the CA certificates that client certificates are checked against."),
    _d("ssl.truststore.certificates", "password", None, "The trusted CA certificates in PEM, inline (instead of ssl.truststore.location)."),
    _d("ssl.client.auth", "string", "none", "Client certificates (mTLS): none, requested or required; the principal is then the certificate's subject.", "read-only", one_of("none", "requested", "required")),
    _d("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted from clients.", "read-only", each_one_of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")),
    _d("ssl.cipher.suites", "list", [], "TLS 1.2 cipher suites in OpenSSL's names; empty keeps the defaults (TLS 1.3 suites are not restricted)."),
    _d("ssl.principal.mapping.rules", "string", "DEFAULT", "Rules mapping a client certificate's subject DN to the user name: DEFAULT or RULE:regex/replacement/[LU], comma-separated."),
    _d("sasl.enabled.mechanisms", "list", ["SCRAM-SHA-256", "SCRAM-SHA-512"], "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported).", "read-only", each_one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
    _d("sasl.jaas.config", "password", None, "JAAS login module of a listener and mechanism, given as listener.name.<l>.<mechanism>.sasl.jaas.config; PlainLoginModule's user_<name>=\"<password>\" options are the PLAIN users."),
    _d("quota.window.size.seconds", "int", 1, "Length of one quota sample window, for client quotas (byte rates, request time) and connection-rate quotas; also the cap on connection-rate and request-time throttles.", "read-only", at_least(1)),
    _d("quota.window.num", "int", 11, "Number of quota sample windows a client-quota rate is measured over; a new client may burst (num - 1) windows' worth before it is throttled.", "read-only", at_least(1)),
    _d("unstable.api.versions.enable", "bool", False, "Advertise unreleased API versions (internal)."),
    _d("broker.shutdown.timeout.ms", "long", 30000, "How long a graceful shutdown may take before remaining tasks are cancelled (ours, not Kafka's).", "read-only", at_least(0)),
    _d("metrics.port", "int", 9404, "Port of the HTTP endpoint serving /metrics (every process of a cluster, from the supervisor) and the web console; 0 picks a free port, -1 disables it (ours, not Kafka's).", "read-only", between(-1, 65535)),
    _d("console.enable", "bool", True, "Serve the web console at /console/ on the metrics.port endpoint (docs/console.md; ours, not Kafka's).", "read-only"),
    # ---- log
    _d("log.dirs", "list", None, "Directories holding the log; takes precedence over log.dir.", "read-only", non_empty_list),
    _d("log.dir", "string", "/tmp/kafka-logs", "Log directory used when log.dirs is unset."),
    _d("num.partitions", "int", 1, "Partitions of auto-created topics.", "read-only", at_least(1)),
    _d("default.replication.factor", "int", 1, "Replication factor of auto-created topics.", "read-only", at_least(1)),
    _d("auto.create.topics.enable", "bool", True, "Create a topic (num.partitions partitions) when Metadata names an unknown one, as Kafka does; Produce never creates topics."),
    _d("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    _d("log.segment.bytes", "int", 1073741824, "Segment size before rolling.", "cluster-wide", at_least(14)),
    _d("log.roll.ms", "long", None, "Time before a segment is rolled; overrides log.roll.hours.", "cluster-wide", at_least(1)),
    _d("log.roll.hours", "int", 168, "Time before a segment is rolled, in hours.", "read-only", at_least(1)),
    _d("log.retention.ms", "long", None, "Retention time; overrides minutes and hours; -1 keeps forever.", "cluster-wide"),
    _d("log.retention.minutes", "int", None, "Retention time in minutes; overrides hours."),
    _d("log.retention.hours", "int", 168, "Retention time in hours."),
    _d("log.retention.bytes", "long", -1, "Retention size per partition; -1 is unlimited.", "cluster-wide"),
    _d("log.retention.check.interval.ms", "long", 300000, "How often retention is enforced.", "read-only", at_least(1)),
    _d("log.index.interval.bytes", "int", 4096, "Bytes between offset-index entries.", "cluster-wide", at_least(0)),
    _d("log.flush.interval.messages", "long", LONG_MAX, "Messages accumulated before an fsync.", "cluster-wide", at_least(1)),
    _d("log.flush.interval.ms", "long", None, "Time before an fsync; unset follows log.flush.scheduler.interval.ms.", "cluster-wide"),
    _d("log.cleanup.policy", "list", ["delete"], "delete and/or compact.", "cluster-wide", each_one_of("delete", "compact")),
    _d("log.cleaner.enable", "bool", True, "Run the log cleaner (compaction of cleanup.policy=compact topics).", "read-only"),
    _d("log.cleaner.threads", "int", 1, "Cleaner tasks, each cleaning one partition at a time in a worker thread.", "read-only", at_least(1)),
    _d("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, "Cleaner I/O (read plus written) per second, all cleaner threads together.", "read-only", at_least(0)),
    _d("log.cleaner.worker", "string", "process", "Where a cleaning pass runs: process (a child process, so the pass never holds the event loop's GIL) or thread (a worker thread; appends wait on the GIL while it runs). Not a Kafka key.", "read-only", one_of("process", "thread")),
    _d("log.cleaner.backoff.ms", "long", 15000, "Sleep of a cleaner with nothing to clean.", "read-only", at_least(0)),
    _d("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the offset map of a pass (24 bytes a key here); a pass stops its dirty range where the map fills.", "read-only", at_least(24)),
    _d("log.cleaner.min.cleanable.ratio", "double", 0.5, "Default min.cleanable.dirty.ratio.", "cluster-wide"),
    _d("log.cleaner.delete.retention.ms", "long", 86400000, "Default delete.retention.ms: how long tombstones and removable transaction markers stay after the first pass that keeps them.", "cluster-wide", at_least(0)),
    _d("log.cleaner.min.compaction.lag.ms", "long", 0, "Default min.compaction.lag.ms.", "cluster-wide", at_least(0)),
    _d("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Default max.compaction.lag.ms.", "cluster-wide", at_least(1)),
    _d("num.recovery.threads.per.data.dir", "int", 1, "Recovery parallelism per log dir.", "cluster-wide", at_least(1)),
    _d("message.max.bytes", "int", 1048588, "Largest record batch accepted.", "cluster-wide", at_least(0)),
    _d("compression.type", "string", "producer", "Topic compression; producer keeps the producer's codec.", "cluster-wide", one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _d("min.insync.replicas", "int", 1, "Minimum in-sync replicas for acks=all.", "cluster-wide", at_least(1)),
    _d("log.message.timestamp.type", "string", "CreateTime", "Default message.timestamp.type of topics: CreateTime (the producer's) or LogAppendTime (the broker's clock).", "cluster-wide", one_of("CreateTime", "LogAppendTime")),
    _d("log.message.timestamp.before.max.ms", "long", LONG_MAX, "Default message.timestamp.before.max.ms: how far in the past a CreateTime timestamp may be.", "cluster-wide", at_least(0)),
    _d("log.message.timestamp.after.max.ms", "long", LONG_MAX, "Default message.timestamp.after.max.ms: how far in the future a CreateTime timestamp may be.", "cluster-wide", at_least(0)),
    _d("log.index.size.max.bytes", "int", 10485760, "Default segment.index.bytes: the offset index's size, which bounds a segment's index entries.", "cluster-wide", at_least(4)),
    # ---- groups and internal topics
    _d("group.initial.rebalance.delay.ms", "int", 3000, "Delay of the first rebalance of an empty group."),
    _d("offsets.retention.minutes", "int", 10080, "Retention of committed offsets of empty groups.", "read-only", at_least(1)),
    _d("offsets.retention.check.interval.ms", "long", 600000, "How often expired committed offsets are removed.", "read-only", at_least(1)),
    _d("offset.metadata.max.bytes", "int", 4096, "Largest metadata string an OffsetCommit may carry.", "read-only", at_least(0)),
    _d("offsets.topic.replication.factor", "int", 3, "Replication of __consumer_offsets (clamped to the cluster size here).", "read-only", at_least(1)),
    _d("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", "read-only", at_least(1)),
    _d("transaction.state.log.replication.factor", "int", 3, "Replication of __transaction_state.", "read-only", at_least(1)),
    _d("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.", "read-only", at_least(1)),
    # ---- transactions (issue 12)
    _d("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms a transactional producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it).", "read-only", at_least(1)),
    _d("transactional.id.expiration.ms", "int", 604800000, "How long a transactional id without an open transaction is kept after its last update.", "read-only", at_least(1)),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often open transactions past their timeout are aborted (fencing their producer).", "read-only", at_least(1)),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "How often expired transactional ids are removed.", "read-only", at_least(1)),
    _d("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    _d("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for."),
    _d("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of consumer-protocol (KIP-848) group members: one missing its heartbeats this long is fenced.", "read-only", at_least(1)),
    _d("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval the coordinator gives consumer-protocol (KIP-848) group members.", "read-only", at_least(1)),
    _d("group.consumer.assignors", "list", ["uniform", "range"], "Server-side assignors of consumer-protocol (KIP-848) groups; the first is the default.", "read-only", each_one_of("uniform", "range")),
    # ---- authorization (issue 11)
    _d("authorizer.class.name", "string", "", "Turns ACL authorization on: org.apache.kafka.metadata.authorizer.StandardAuthorizer or kafka.security.authorizer.AclAuthorizer (both are the standard ACL authorizer here); empty allows everything.", "read-only", _authorizer_class_validator),
    _d("super.users", "string", None, "Principals (User:name) separated by semicolons that every ACL check allows."),
    _d("allow.everyone.if.no.acl.found", "bool", False, "Allow an operation on a resource that no ACL applies to; otherwise only ACLs and super users allow."),
]
# fmt: on

CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

PER_LISTENER_KEYS: frozenset[str] = frozenset(
    {
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
        "connections.max.reauth.ms",
        "sasl.server.max.receive.size",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "socket.listen.backlog.size",
        "sasl.enabled.mechanisms",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.principal.mapping.rules",
    }
)
"""Keys that may be given as `listener.name.<listener>.<key>` to override the
broker-wide value for one listener."""

PER_MECHANISM_KEYS: frozenset[str] = frozenset({"sasl.jaas.config", "connections.max.reauth.ms"})
"""Keys that may also be given as `listener.name.<listener>.<mechanism>.<key>`
(e.g. `listener.name.sasl_ssl.plain.sasl.jaas.config`), as Kafka allows."""

_LISTENER_PREFIX_RE = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")
_ALIASES = {"broker.id": "node.id"}
_SENSITIVE_RE = re.compile(r"(password|secret|jaas\.config|keystore\.key$)", re.IGNORECASE)


# --------------------------------------------------------------------------- .properties


_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[str]:
    """Join natural lines into logical lines the way java.util.Properties does:
    a line ending in an odd number of backslashes continues on the next line,
    whose leading whitespace is dropped; comment lines never continue."""
    current: list[str] = []
    continuing = False
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_WHITESPACE)
        if not continuing:
            if not line or line[0] in "#!":
                continue
        elif not line:
            # A blank continuation line ends the logical line.
            yield "".join(current)
            current, continuing = [], False
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            current.append(line[:-1])
            continuing = True
        else:
            current.append(line)
            yield "".join(current)
            current, continuing = [], False
    if current:
        yield "".join(current)


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= len(text):
            break  # a lone trailing backslash is dropped, as Java does
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    escaped = False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
            continue
        if c == "\\":
            escaped = True
        elif c in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        elif c in _WHITESPACE:
            key_end, value_start = i, i + 1
            break
    while value_start < len(line):
        c = line[value_start]
        if c not in _WHITESPACE:
            if not has_separator and c in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse the java.util.Properties text format (the subset Kafka configs use).

    Comments start with '#' or '!'; a key is separated from its value by '=',
    ':' or whitespace; backslash continues a line; `\\t \\n \\r \\f \\uXXXX`
    are escapes and any other escaped character stands for itself. As in Java,
    trailing whitespace of a value is kept here; typed config parsing trims it.
    Later duplicates win.
    """
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        result[_unescape(raw_key)] = _unescape(raw_value)
    return result


def escape_properties_text(text: str, is_key: bool) -> str:
    """The inverse of parse_properties' unescaping, for writing .properties files."""
    out: list[str] = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!" or (c == " " and (is_key or i == 0)):
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else c)
        else:
            out.append(c)
    return "".join(out)


# --------------------------------------------------------------------------- the config


def _find_def(key: str) -> ConfigDef | None:
    definition = CONFIG_DEFS.get(key)
    if definition is not None:
        return definition
    match = _LISTENER_PREFIX_RE.match(key)
    if match and match.group(2) in PER_LISTENER_KEYS:
        base = CONFIG_DEFS[match.group(2)]
        return attrs.evolve(base, name=key)
    if match:
        _, dot, rest = match.group(2).partition(".")
        if dot and rest in PER_MECHANISM_KEYS:
            return attrs.evolve(CONFIG_DEFS[rest], name=key)
    return None


class BrokerConfig:
    """An immutable, validated broker configuration.

    Only the operator's strings are stored; typed values are derived from them,
    so `with_updates` (dynamic config) re-runs exactly the start-up validation.
    """

    __slots__ = ("_raw", "_values", "advertised_listeners", "listeners")

    _raw: dict[str, str]
    _values: dict[str, object]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]

    def __init__(self, raw: Mapping[str, str] | None = None) -> None:
        raw_dict = {k.strip(): v for k, v in (raw or {}).items()}
        values: dict[str, object] = {}
        for name, known in CONFIG_DEFS.items():
            values[name] = known.default
        for key, value in raw_dict.items():
            definition = _find_def(key)
            if definition is not None:
                values[key] = definition.parse(value)
        self._raw = raw_dict
        self._values = values
        self._resolve_aliases()
        self.listeners, self.advertised_listeners = self._validate()

    # ---- construction helpers

    def _resolve_aliases(self) -> None:
        values = self._values
        if "broker.id" in self._raw:
            broker_id = values["broker.id"]
            if "node.id" in self._raw and values["node.id"] != broker_id:
                raise ConfigError(
                    f"broker.id: {broker_id} differs from node.id {values['node.id']}; "
                    "set only one of them"
                )
            values["node.id"] = broker_id
        values["broker.id"] = values["node.id"]
        if values["log.dirs"] is None:
            values["log.dirs"] = split_list(str(values["log.dir"]))

    def _validate(self) -> tuple[tuple[Endpoint, ...], tuple[Endpoint, ...]]:
        protocol_map = parse_protocol_map(self.get_str("listener.security.protocol.map"))
        listeners = parse_listeners(self.get_str("listeners"), protocol_map, "listeners")
        if not listeners:
            raise ConfigError("listeners: at least one listener must be configured")
        validate_listener_uniqueness(listeners, "listeners")
        names = {e.listener_name for e in listeners}

        advertised_value = self.get_optional_str("advertised.listeners")
        if advertised_value is None:
            advertised = listeners
        else:
            advertised = parse_listeners(advertised_value, protocol_map, "advertised.listeners")
            validate_listener_uniqueness(advertised, "advertised.listeners", check_ports=False)
            for endpoint in advertised:
                if endpoint.host == "0.0.0.0":
                    raise ConfigError(
                        "advertised.listeners: cannot use the nonroutable meta-address "
                        f"0.0.0.0 ({endpoint.url()}); use a routable IP address"
                    )
                if endpoint.listener_name not in names:
                    raise ConfigError(
                        f"advertised.listeners: listener {endpoint.listener_name} is not "
                        f"one of the listeners ({', '.join(sorted(names))})"
                    )

        explicit_name = self.get_optional_str("inter.broker.listener.name")
        if explicit_name is not None and "security.inter.broker.protocol" in self._raw:
            raise ConfigError(
                "inter.broker.listener.name: only one of inter.broker.listener.name and "
                "security.inter.broker.protocol may be set"
            )
        if explicit_name is not None or "security.inter.broker.protocol" in self._raw:
            key = (
                "inter.broker.listener.name"
                if explicit_name is not None
                else "security.inter.broker.protocol"
            )
            inter = self.inter_broker_listener_name
            if inter not in protocol_map:
                raise ConfigError(f"{key}: no security protocol defined for listener {inter}")
            if inter not in {e.listener_name for e in advertised}:
                raise ConfigError(
                    f"{key}: the inter-broker listener {inter} must be among the "
                    "advertised listeners"
                )

        srmb = self.get_int("socket.request.max.bytes")
        qmrb = self.get_int("queued.max.request.bytes")
        if 0 < qmrb < srmb:
            raise ConfigError(
                f"queued.max.request.bytes: must be -1 (a derived bound) or >= "
                f"socket.request.max.bytes ({srmb}), got {qmrb}"
            )
        if (
            self.get_int("max.connections.per.ip") == 0
            and not self.max_connections_per_ip_overrides
        ):
            raise ConfigError(
                "max.connections.per.ip: 0 is only allowed when "
                "max.connections.per.ip.overrides is set"
            )
        idle = self.get_int("connections.max.idle.ms")
        delay = self.get_int("connection.failed.authentication.delay.ms")
        if idle >= 0 and delay >= idle:
            raise ConfigError(
                f"connection.failed.authentication.delay.ms: must be < "
                f"connections.max.idle.ms ({idle}), got {delay}"
            )
        for key in self._raw:
            match = _LISTENER_PREFIX_RE.match(key)
            if match and match.group(2) in PER_LISTENER_KEYS:
                listener = match.group(1).upper()
                if listener not in protocol_map and listener not in names:
                    logger.warning("%s: listener %s is not configured; ignored", key, listener)
        return listeners, advertised

    # ---- typed access

    def _value(self, key: str) -> object:
        try:
            return self._values[key]
        except KeyError:
            definition = _find_def(key)
            if definition is None:
                raise KeyError(f"unknown config key {key!r}") from None
            return definition.default

    def get_int(self, key: str) -> int:
        value = self._value(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{key}: has no integer value (got {value!r})")
        return value

    def get_optional_int(self, key: str) -> int | None:
        value = self._value(key)
        return None if value is None else self.get_int(key)

    def get_str(self, key: str) -> str:
        value = self._value(key)
        if value is None:
            raise ConfigError(f"{key}: is not set")
        if isinstance(value, list):
            return ",".join(str(v) for v in value)
        return str(value)

    def get_optional_str(self, key: str) -> str | None:
        return None if self._value(key) is None else self.get_str(key)

    def get_bool(self, key: str) -> bool:
        value = self._value(key)
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: has no boolean value (got {value!r})")
        return value

    def get_list(self, key: str) -> list[str]:
        value = self._value(key)
        if value is None:
            return []
        if isinstance(value, list):
            return [str(v) for v in value]
        return split_list(str(value))

    def get_double(self, key: str) -> float:
        value = self._value(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"{key}: has no numeric value (got {value!r})")
        return float(value)

    def listener_int(self, listener_name: str, key: str) -> int:
        """`listener.name.<listener>.<key>` if set (any case of the listener
        name), else the broker-wide value, as Kafka's valuesWithPrefixOverride."""
        prefixed = self.listener_key(listener_name, key)
        if prefixed in self._values:
            return self.get_int(prefixed)
        for raw_key in self._raw:
            if raw_key.lower() == prefixed and raw_key in self._values:
                return self.get_int(raw_key)
        return self.get_int(key)

    @staticmethod
    def listener_key(listener_name: str, key: str) -> str:
        return f"listener.name.{listener_name.lower()}.{key}"

    def is_set(self, key: str) -> bool:
        """Whether the operator gave the key explicitly (defaults do not count)."""
        return key in self._raw

    @property
    def raw(self) -> Mapping[str, str]:
        return dict(self._raw)

    # ---- derived values

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dirs(self) -> list[str]:
        return self.get_list("log.dirs")

    @property
    def inter_broker_listener_name(self) -> str:
        explicit = self.get_optional_str("inter.broker.listener.name")
        if explicit is not None:
            return explicit.upper()
        return self.get_str("security.inter.broker.protocol").upper()

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        return parse_ip_overrides(self.get_str("max.connections.per.ip.overrides"))

    @property
    def log_roll_ms(self) -> int:
        roll_ms = self.get_optional_int("log.roll.ms")
        return roll_ms if roll_ms is not None else self.get_int("log.roll.hours") * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        """Kafka's precedence: ms, then minutes, then hours; negative means forever."""
        retention_ms = self.get_optional_int("log.retention.ms")
        if retention_ms is not None:
            return retention_ms
        minutes = self.get_optional_int("log.retention.minutes")
        if minutes is not None:
            return minutes * 60_000
        return self.get_int("log.retention.hours") * 3_600_000

    # ---- copies and reporting

    def with_updates(self, updates: Mapping[str, str]) -> BrokerConfig:
        raw = dict(self._raw)
        raw.update(updates)
        _warn_unknown(updates)
        return BrokerConfig(raw)

    def effective(self) -> dict[str, str]:
        """Every known key with the value in effect plus any unknown keys given,
        secrets masked, sorted by key — what Kafka prints at start-up."""
        result: dict[str, str] = {}
        for name, known in CONFIG_DEFS.items():
            result[name] = _render(self._values.get(name), known)
        for key, value in self._raw.items():
            if key in result:
                continue
            definition = _find_def(key)
            if definition is not None:
                result[key] = _render(self._values.get(key), definition)
            else:
                result[key] = HIDDEN if _SENSITIVE_RE.search(key) else value
        return dict(sorted(result.items()))

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v}" for k, v in self.effective().items() if k in self._raw)
        return f"BrokerConfig({given})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BrokerConfig) and self._raw == other._raw

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._raw.items())))


def _render(value: object, definition: ConfigDef) -> str:
    if definition.type == "password" and value is not None:
        return HIDDEN
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _warn_unknown(raw: Mapping[str, str]) -> None:
    for key in raw:
        if _find_def(key.strip()) is None:
            logger.warning("%s", unknown_key_warning(key.strip()))


def unknown_key_warning(key: str) -> str:
    """The warning for a key no definition knows, with the likely intended key: a
    typo's nearest known key, or the broker-wide default of a topic key."""
    topic = TOPIC_CONFIGS.get(key)
    if topic is not None and topic.synonyms:
        hint = f"; did you mean {topic.synonyms[0]}? ({key} is a topic config)"
    else:
        suggestion = _closest_key(key)
        hint = f"; did you mean {suggestion}?" if suggestion else ""
    return f"{key}: unknown config key, kept but without effect{hint}"


def _closest_key(key: str) -> str | None:
    match = _LISTENER_PREFIX_RE.match(key)
    if match:
        prefix, known = f"listener.name.{match.group(1)}.", PER_LISTENER_KEYS
        key = match.group(2)
    else:
        prefix, known = "", frozenset(CONFIG_DEFS)
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
    return prefix + close[0] if close else None


def load_config(path: str | None, overrides: Sequence[str] = ()) -> BrokerConfig:
    """Read a server.properties file (None: defaults only) and apply `--override
    key=value` strings on top, so the command line wins as in kafka-server-start."""
    raw: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
        raw.update(parse_properties(text))
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{override}: an override must be of the form key=value")
        raw[key.strip()] = value
    _warn_unknown(raw)
    return BrokerConfig(raw)
