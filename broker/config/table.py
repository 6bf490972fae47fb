"""The one table of broker keys: name, type, default, documentation, validator, how it
may change at runtime, whether a listener may override it, and the topic key it is
the broker-wide default of.

Everything else about a key is derived from its row: what IncrementalAlterConfigs /
AlterConfigs accept on the broker resource (`DYNAMIC_BROKER_CONFIGS`), the per-listener
and per-mechanism prefixes, the topic keys' broker synonyms DescribeConfigs reports,
the typed settings groups (`broker/config/settings.py`) and docs/configuration.md
(`tools/generate_config_docs.py`).
"""

from __future__ import annotations

import enum
import re

import attrs

from broker.config import validators as v
from broker.config.endpoint import DEFAULT_PROTOCOL_MAP, SECURITY_PROTOCOLS
from broker.config.errors import ConfigError
from broker.config.types import INT_MAX, LONG_MAX, parse_value
from broker.config.types import ConfigType as T
from broker.config.validators import Validator


class DynamicMode(enum.Enum):
    """Kafka's DynamicBrokerConfig modes, for what this broker can change at runtime:
    a cluster-wide key may be set on the default resource ("") or on one broker, a
    per-broker key only on one broker, a read-only key only in server.properties."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


READ_ONLY = DynamicMode.READ_ONLY
CLUSTER_WIDE = DynamicMode.CLUSTER_WIDE


@attrs.frozen
class ConfigDef:
    """One broker key. `topic` names the topic key this one is a broker-wide default of
    (Kafka's ServerTopicConfigSynonyms; several broker keys may name one topic key, in
    Kafka's precedence order, which is the table's)."""

    name: str
    type: T
    default: object
    doc: str
    validator: Validator | None = None
    dynamic: DynamicMode = READ_ONLY
    per_listener: bool = False
    per_mechanism: bool = False
    topic: str | None = None

    def parse(self, raw: str) -> object:
        """The string value as this key's type, validated; ConfigError names the key."""
        try:
            value = parse_value(self.type, raw)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
        self.validate(value)
        return value

    def validate(self, value: object) -> None:
        if self.validator is None:
            return
        try:
            self.validator(value)
        except ValueError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    @property
    def is_dynamic(self) -> bool:
        return self.dynamic != READ_ONLY


def _d(
    name: str,
    type_: T,
    default: object,
    doc: str,
    validator: Validator | None = None,
    *,
    dynamic: DynamicMode = READ_ONLY,
    per_listener: bool = False,
    per_mechanism: bool = False,
    topic: str | None = None,
) -> ConfigDef:
    return ConfigDef(
        name, type_, default, doc, validator, dynamic, per_listener, per_mechanism, topic
    )


# fmt: off
_DEFS: list[ConfigDef] = [
    # ---- listeners (spec §1.1)
    _d("listeners", T.STRING, "PLAINTEXT://:9092", "Comma-separated NAME://host:port listeners; empty host binds the wildcard, port 0 an ephemeral port."),
    _d("advertised.listeners", T.STRING, None, "Endpoints published in Metadata; defaults to listeners. Must not use 0.0.0.0."),
    _d("listener.security.protocol.map", T.STRING, DEFAULT_PROTOCOL_MAP, "NAME:PROTOCOL pairs mapping each listener name to its security protocol.", v.protocol_map),
    _d("inter.broker.listener.name", T.STRING, None, "Listener used between brokers (with zookeeper.connect they connect to each other's, with its security protocol and the broker's own TLS and SASL settings of it; it must be advertised); it is the protected listener for connection quotas. Set it or security.inter.broker.protocol, not both."),
    _d("security.inter.broker.protocol", T.STRING, "PLAINTEXT", "Security protocol between brokers; names the inter-broker listener when inter.broker.listener.name is unset.", v.one_of(*SECURITY_PROTOCOLS)),
    _d("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", "SASL mechanism the brokers log in to each other with where the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (with zookeeper.connect): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, one of that listener's sasl.enabled.mechanisms (Kafka's default GSSAPI is not supported, so set it). The broker logs in with username/password of that listener's listener.name.<l>.<mechanism>.sasl.jaas.config."),
    _d("control.plane.listener.name", T.STRING, None, "ZooKeeper-mode control plane listener; accepted for compatibility, ignored."),
    _d("early.start.listeners", T.STRING, None, "Listeners started before the authorizer is ready; accepted for compatibility."),
    # ---- identity
    _d("node.id", T.INT, 1, "This broker's id (alias: broker.id).", v.at_least(0)),
    _d("broker.id", T.INT, None, "Legacy alias of node.id.", v.at_least(0)),
    _d("cluster.id", T.STRING, None, "Cluster id; generated and persisted with the log when unset."),
    _d("process.roles", T.LIST, [], "KRaft roles; accepted for compatibility (this broker is always a single combined node).", v.each_one_of("broker", "controller")),
    _d("controller.listener.names", T.STRING, None, "KRaft controller listeners; accepted for compatibility, ignored."),
    _d("controller.quorum.voters", T.LIST, [], "KRaft quorum voters; accepted for compatibility, ignored."),
    # ---- a cluster of processes on one machine (docs/cluster.md)
    _d("process.count", T.INT, 0, "Broker processes to run under one supervisor, each a node with its own node.id (node.id + i) and ports (each listener's port + i); 0 (the default) means one per core this process may run on (a single process on one core); 1 runs a single process without a supervisor; with zookeeper.connect each process is a broker among hosts with its own log dir node-<id> under each log.dirs entry (ours, not Kafka's).", v.at_least(0)),
    _d("cluster.metadata.poll.interval.ms", T.INT, 50, "How often each process of a cluster checks the shared metadata store's version for changes (ours, not Kafka's).", v.at_least(1)),
    _d("cluster.load.report.interval.ms", T.INT, 1000, "How often each process of a cluster reports its load (bytes produced per second) to the shared metadata store; new partition leaders go to the least loaded process (ours, not Kafka's).", v.at_least(1)),
    _d("cluster.load.window.ms", T.INT, 60000, "The window over which each process of a cluster measures the bytes produced to it per second, the load that places new partition leaders (ours, not Kafka's).", v.at_least(1)),
    _d("process.listener.ports", T.LIST, [], "Explicit ports per listener for the processes of a cluster, NAME:FIRST-LAST (process i binds the i-th); a listener not named binds its port + i (ours, not Kafka's)."),
    _d("process.advertised.listener.ports", T.LIST, [], "Like process.listener.ports for the ports advertised to clients (e.g. those a container platform publishes); a listener not named follows advertised.listeners' port + i (ours, not Kafka's)."),
    # ---- brokers on several hosts, through ZooKeeper (docs/replication.md)
    _d("zookeeper.connect", T.STRING, None, "ZooKeeper servers as host:port[,host:port...][/chroot] (the chroot is created if missing); when set, the broker registers in /brokers/ids and takes part in the controller election. Unset: the single-host cluster, no ZooKeeper.", v.zookeeper_connect),
    _d("zookeeper.session.timeout.ms", T.INT, 18000, "ZooKeeper session timeout: a broker silent this long loses its registration (and the controllership).", v.at_least(1)),
    _d("zookeeper.connection.timeout.ms", T.INT, None, "How long to wait for a ZooKeeper connection at start-up; defaults to zookeeper.session.timeout.ms.", v.at_least(1)),
    _d("broker.rack", T.STRING, None, "The rack of this broker, published in its /brokers/ids registration."),
    # replication (issue 20): read by broker/replication/, in effect only with zookeeper.connect
    _d("replica.lag.time.max.ms", T.LONG, 30000, "A follower not caught up with the leader's log end for this long leaves the ISR (checked every half of it); takes effect with zookeeper.connect.", v.at_least(1)),
    _d("replica.fetch.backoff.ms", T.INT, 1000, "How long a follower waits before fetching a partition again after an error; takes effect with zookeeper.connect.", v.at_least(0)),
    _d("replica.fetch.wait.max.ms", T.INT, 500, "Longest a follower's Fetch waits at the leader for new records; takes effect with zookeeper.connect.", v.at_least(0)),
    _d("replica.fetch.max.bytes", T.INT, 1048576, "Bytes a follower's Fetch asks for per partition (a larger first batch is still returned whole); takes effect with zookeeper.connect.", v.at_least(0)),
    _d("num.replica.fetchers", T.INT, 1, "Fetcher tasks per leader broker, each with its own connection; a leader's partitions are spread over them as Kafka hashes them (abs(31 * topic.hashCode() + partition) % n); takes effect with zookeeper.connect.", v.at_least(1)),
    _d("auto.leader.rebalance.enable", T.BOOLEAN, True, "The controller moves leadership back to each partition's preferred replica when a broker leads too few of its own; takes effect with zookeeper.connect."),
    _d("leader.imbalance.per.broker.percentage", T.INT, 10, "Share (percent) of a broker's preferred partitions led elsewhere above which the controller rebalances them; takes effect with zookeeper.connect.", v.between(0, 100)),
    _d("leader.imbalance.check.interval.seconds", T.LONG, 300, "How often the controller checks the leader imbalance; takes effect with zookeeper.connect.", v.at_least(1)),
    _d("controlled.shutdown.enable", T.BOOLEAN, True, "On SIGTERM, ask the controller to move this broker's leaderships away before stopping; takes effect with zookeeper.connect."),
    _d("controlled.shutdown.max.retries", T.INT, 3, "How many times a controlled shutdown asks the controller again (while partitions remain or no controller answers) before the broker stops anyway.", v.at_least(0)),
    _d("controlled.shutdown.retry.backoff.ms", T.LONG, 5000, "Wait between a controlled shutdown's attempts.", v.at_least(0)),
    _d("leader.replication.throttled.rate", T.LONG, LONG_MAX, "Bytes per second this broker sends, as leader, to followers of the partitions its topics list in leader.replication.throttled.replicas (a reassignment's throttle, set by kafka-reassign-partitions --throttle); a throttled partition is left out of a follower's Fetch answer while the rate is over it.", v.at_least(0), dynamic=CLUSTER_WIDE),
    _d("follower.replication.throttled.rate", T.LONG, LONG_MAX, "Bytes per second this broker fetches, as follower, of the partitions its topics list in follower.replication.throttled.replicas; a throttled partition is left out of its Fetch requests while the rate is over it.", v.at_least(0), dynamic=CLUSTER_WIDE),
    _d("replication.quota.window.num", T.INT, 11, "Number of samples the replication throttle rates are measured over.", v.at_least(1)),
    _d("replication.quota.window.size.seconds", T.INT, 1, "Length of one sample of the replication throttle rates.", v.at_least(1)),
    _d("unclean.leader.election.enable", T.BOOLEAN, False, "Default unclean.leader.election.enable: whether the controller may elect a replica outside the ISR (losing records) when no ISR member is live; takes effect with zookeeper.connect.", topic="unclean.leader.election.enable"),
    # ---- socket server (spec §3, §4, §6)
    _d("num.network.threads", T.INT, 3, "Processors per listener (also listener.name.X.num.network.threads).", v.at_least(1), dynamic=CLUSTER_WIDE, per_listener=True),
    _d("num.io.threads", T.INT, 8, "Request handler tasks.", v.at_least(1), dynamic=CLUSTER_WIDE),
    _d("queued.max.requests", T.INT, 500, "Capacity of the request queue; a full queue blocks processors.", v.at_least(1)),
    _d("queued.max.request.bytes", T.LONG, -1, "Memory pool for received requests, held from a request's size prefix until its response is written; waiting connections are served in order, small requests from the pool's last tenth. Above 0: the pool's size, at least socket.request.max.bytes. <= 0 (the default) is not unbounded as in Kafka: the pool is then max(socket.request.max.bytes, 104857600) bytes. Fetch responses waiting to be written get a second budget of the same size (each granted at least 1 MiB or one batch)."),
    _d("socket.request.max.bytes", T.INT, 104857600, "Largest request frame; bigger frames close the connection.", v.at_least(1)),
    _d("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF of accepted sockets; -1 keeps the OS default.", per_listener=True),
    _d("socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF of listening sockets; -1 keeps the OS default.", per_listener=True),
    _d("socket.listen.backlog.size", T.INT, 50, "Listen backlog (the kernel may cap it).", v.at_least(1), per_listener=True),
    _d("max.connections", T.INT, INT_MAX, "Broker-wide connection limit (also listener.name.X.max.connections); exceeding it blocks the acceptor.", v.at_least(0), dynamic=CLUSTER_WIDE, per_listener=True),
    _d("max.connection.creation.rate", T.INT, INT_MAX, "Broker-wide new connections per second (also per listener); exceeding it delays accepts.", v.at_least(0), dynamic=CLUSTER_WIDE, per_listener=True),
    _d("max.connections.per.ip", T.INT, INT_MAX, "Connections per client IP; 0 is only allowed with overrides.", v.at_least(0), dynamic=CLUSTER_WIDE),
    _d("max.connections.per.ip.overrides", T.STRING, "", "Per host or IP limits: host:count,ip:count.", v.per_ip_overrides, dynamic=CLUSTER_WIDE),
    _d("connections.max.idle.ms", T.LONG, 600000, "Idle connections are closed after this long; negative disables."),
    _d("socket.request.read.timeout.ms", T.LONG, 300000, "A request must be received whole within this long of its first byte, else the connection is closed and counted (read-timeout-connections-killed); the clock restarts when the memory pool admits the frame. About 3x what a 100 MiB frame takes at 10 Mbit/s. Ours, not Kafka's; <= 0 disables."),
    _d("connection.failed.authentication.delay.ms", T.INT, 100, "Delay before closing a connection that failed authentication; must be < connections.max.idle.ms.", v.at_least(0)),
    _d("connections.max.reauth.ms", T.LONG, 0, "SASL session lifetime; 0 disables re-authentication.", v.at_least(0), per_listener=True, per_mechanism=True),
    _d("sasl.server.max.receive.size", T.INT, 524288, "Largest frame accepted before and during SASL authentication.", per_listener=True),
    # ---- TLS and SASL listeners (issue 11); each also as listener.name.<l>.<key>
    _d("ssl.keystore.type", T.STRING, "PEM", "Format of the key store; only PEM is supported (Kafka's default is JKS).", v.one_of("PEM"), per_listener=True),
    _d("ssl.keystore.location", T.STRING, None, "PEM file holding the listener's private key and certificate chain.", per_listener=True),
    _d("ssl.keystore.certificate.chain", T.PASSWORD, None, "The certificate chain in PEM, inline (instead of ssl.keystore.location).", per_listener=True),
    _d("ssl.keystore.key", T.PASSWORD, None, "The private key in PEM, inline (with ssl.keystore.certificate.chain).", per_listener=True),
    _d("ssl.key.password", T.PASSWORD, None, "Password of an encrypted private key.", per_listener=True),
    _d("ssl.truststore.type", T.STRING, "PEM", "Format of the trust store; only PEM is supported (Kafka's default is JKS).", v.one_of("PEM"), per_listener=True),
    _d("ssl.truststore.location", T.STRING, None, "PEM file of the CA certificates that client certificates are checked against.", per_listener=True),
    _d("ssl.truststore.certificates", T.PASSWORD, None, "The trusted CA certificates in PEM, inline (instead of ssl.truststore.location).", per_listener=True),
    _d("ssl.client.auth", T.STRING, "none", "Client certificates (mTLS): none, requested or required; the principal is then the certificate's subject.", v.one_of("none", "requested", "required"), per_listener=True),
    _d("ssl.enabled.protocols", T.LIST, ['TLSv1.2', 'TLSv1.3'], "TLS versions accepted from clients.", v.each_one_of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"), per_listener=True),
    _d("ssl.cipher.suites", T.LIST, [], "TLS 1.2 cipher suites in OpenSSL's names; empty keeps the defaults (TLS 1.3 suites are not restricted).", per_listener=True),
    _d("ssl.endpoint.identification.algorithm", T.STRING, "https", "How a broker checks another broker's certificate when it connects to its SSL or SASL_SSL inter-broker listener (trusting the listener's ssl.truststore.*, presenting its ssl.keystore.*): https checks the host name (or IP address) it connects to against the certificate; empty checks only the chain.", v.one_of("https", "HTTPS", ""), per_listener=True),
    _d("ssl.principal.mapping.rules", T.STRING, "DEFAULT", "Rules mapping a client certificate's subject DN to the user name: DEFAULT or RULE:regex/replacement/[LU], comma-separated.", per_listener=True),
    _d("sasl.enabled.mechanisms", T.LIST, ['SCRAM-SHA-256', 'SCRAM-SHA-512'], "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default, GSSAPI, is not supported).", v.each_one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), per_listener=True),
    _d("sasl.jaas.config", T.PASSWORD, None, "JAAS login module of a listener and mechanism, given as listener.name.<l>.<mechanism>.sasl.jaas.config; PlainLoginModule's user_<name>=\"<password>\" options are the PLAIN users.", per_mechanism=True),
    _d("quota.window.size.seconds", T.INT, 1, "Length of one quota sample window, for client quotas (byte rates, request time) and connection-rate quotas; also the cap on connection-rate and request-time throttles.", v.at_least(1)),
    _d("quota.window.num", T.INT, 11, "Number of quota sample windows a client-quota rate is measured over; a new client may burst (num - 1) windows' worth before it is throttled.", v.at_least(1)),
    _d("unstable.api.versions.enable", T.BOOLEAN, False, "Advertise unreleased API versions (internal)."),
    _d("broker.shutdown.timeout.ms", T.LONG, 30000, "How long a graceful shutdown may take before remaining tasks are cancelled (ours, not Kafka's).", v.at_least(0)),
    _d("metrics.port", T.INT, 9404, "Port of the HTTP endpoint serving /metrics (every process of a cluster or of a host among hosts, from the supervisor) and the web console; 0 picks a free port, -1 disables it (ours, not Kafka's).", v.between(-1, 65535)),
    _d("console.enable", T.BOOLEAN, True, "Serve the web console at /console/ on the metrics.port endpoint (docs/console.md; ours, not Kafka's)."),
    # ---- log
    _d("log.dirs", T.LIST, None, "Directories holding the log; takes precedence over log.dir.", v.non_empty_list),
    _d("log.dir", T.STRING, "/tmp/kafka-logs", "Log directory used when log.dirs is unset."),
    _d("num.partitions", T.INT, 1, "Partitions of auto-created topics.", v.at_least(1)),
    _d("default.replication.factor", T.INT, 1, "Replication factor of auto-created topics and of CreateTopics without one; above 1 it takes effect with zookeeper.connect (a single host has one replica).", v.at_least(1)),
    _d("auto.create.topics.enable", T.BOOLEAN, True, "Create a topic (num.partitions partitions) when Metadata names an unknown one, as Kafka does; Produce never creates topics."),
    _d("delete.topic.enable", T.BOOLEAN, True, "Allow DeleteTopics."),
    _d("log.segment.bytes", T.INT, 1073741824, "Segment size before rolling.", v.at_least(14), topic="segment.bytes"),
    _d("log.roll.ms", T.LONG, None, "Time before a segment is rolled; overrides log.roll.hours.", v.at_least(1), topic="segment.ms"),
    _d("log.roll.hours", T.INT, 168, "Time before a segment is rolled, in hours.", v.at_least(1), topic="segment.ms"),
    _d("log.retention.ms", T.LONG, None, "Retention time; overrides minutes and hours; -1 keeps forever.", topic="retention.ms"),
    _d("log.retention.minutes", T.INT, None, "Retention time in minutes; overrides hours.", topic="retention.ms"),
    _d("log.retention.hours", T.INT, 168, "Retention time in hours.", topic="retention.ms"),
    _d("log.retention.bytes", T.LONG, -1, "Retention size per partition; -1 is unlimited.", topic="retention.bytes"),
    _d("log.retention.check.interval.ms", T.LONG, 300000, "How often retention is enforced.", v.at_least(1)),
    _d("log.index.interval.bytes", T.INT, 4096, "Bytes between offset-index entries.", v.at_least(0), topic="index.interval.bytes"),
    _d("log.flush.interval.messages", T.LONG, LONG_MAX, "Messages accumulated before an fsync.", v.at_least(1), topic="flush.messages"),
    _d("log.flush.interval.ms", T.LONG, None, "Time before an fsync; unset follows log.flush.scheduler.interval.ms.", topic="flush.ms"),
    _d("log.cleanup.policy", T.LIST, ['delete'], "delete and/or compact.", v.each_one_of("delete", "compact"), topic="cleanup.policy"),
    _d("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner (compaction of cleanup.policy=compact topics)."),
    _d("log.cleaner.threads", T.INT, 1, "Cleaner tasks, each cleaning one partition at a time in a worker thread.", v.at_least(1)),
    _d("log.cleaner.io.max.bytes.per.second", T.DOUBLE, 1.7976931348623157e+308, "Cleaner I/O (read plus written) per second, all cleaner threads together.", v.at_least(0)),
    _d("log.cleaner.worker", T.STRING, "process", "Where a cleaning pass runs: process (a child process, so the pass never holds the event loop's GIL) or thread (a worker thread; appends wait on the GIL while it runs). Not a Kafka key.", v.one_of("process", "thread")),
    _d("log.cleaner.backoff.ms", T.LONG, 15000, "Sleep of a cleaner with nothing to clean.", v.at_least(0)),
    _d("log.cleaner.dedupe.buffer.size", T.LONG, 134217728, "Memory for the offset map of a pass (24 bytes a key here); a pass stops its dirty range where the map fills.", v.at_least(24)),
    _d("log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Default min.cleanable.dirty.ratio.", topic="min.cleanable.dirty.ratio"),
    _d("log.cleaner.delete.retention.ms", T.LONG, 86400000, "Default delete.retention.ms: how long tombstones and removable transaction markers stay after the first pass that keeps them.", v.at_least(0), topic="delete.retention.ms"),
    _d("log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Default min.compaction.lag.ms.", v.at_least(0), topic="min.compaction.lag.ms"),
    _d("log.cleaner.max.compaction.lag.ms", T.LONG, LONG_MAX, "Default max.compaction.lag.ms.", v.at_least(1), topic="max.compaction.lag.ms"),
    _d("num.recovery.threads.per.data.dir", T.INT, 1, "Recovery parallelism per log dir.", v.at_least(1)),
    _d("message.max.bytes", T.INT, 1048588, "Largest record batch accepted.", v.at_least(0), topic="max.message.bytes"),
    _d("compression.type", T.STRING, "producer", "Topic compression; producer keeps the producer's codec.", v.one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), topic="compression.type"),
    _d("min.insync.replicas", T.INT, 1, "Minimum in-sync replicas for acks=all: fewer answer NOT_ENOUGH_REPLICAS (before the append) or NOT_ENOUGH_REPLICAS_AFTER_APPEND. Without zookeeper.connect the ISR is the leader alone, so acks=all to a topic asking for more than 1 is refused.", v.at_least(1), topic="min.insync.replicas"),
    _d("log.message.timestamp.type", T.STRING, "CreateTime", "Default message.timestamp.type of topics: CreateTime (the producer's) or LogAppendTime (the broker's clock).", v.one_of("CreateTime", "LogAppendTime"), topic="message.timestamp.type"),
    _d("log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, "Default message.timestamp.before.max.ms: how far in the past a CreateTime timestamp may be.", v.at_least(0), topic="message.timestamp.before.max.ms"),
    _d("log.message.timestamp.after.max.ms", T.LONG, LONG_MAX, "Default message.timestamp.after.max.ms: how far in the future a CreateTime timestamp may be.", v.at_least(0), topic="message.timestamp.after.max.ms"),
    _d("log.index.size.max.bytes", T.INT, 10485760, "Default segment.index.bytes: the offset index's size, which bounds a segment's index entries.", v.at_least(4), topic="segment.index.bytes"),
    # ---- groups and internal topics
    _d("group.initial.rebalance.delay.ms", T.INT, 3000, "Delay of the first rebalance of an empty group."),
    _d("offsets.retention.minutes", T.INT, 10080, "Retention of committed offsets of empty groups.", v.at_least(1)),
    _d("offsets.retention.check.interval.ms", T.LONG, 600000, "How often expired committed offsets are removed.", v.at_least(1)),
    _d("offset.metadata.max.bytes", T.INT, 4096, "Largest metadata string an OffsetCommit may carry.", v.at_least(0)),
    _d("offsets.topic.replication.factor", T.INT, 3, "Replication of __consumer_offsets (clamped to the cluster size here).", v.at_least(1)),
    _d("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets.", v.at_least(1)),
    _d("transaction.state.log.replication.factor", T.INT, 3, "Replication of __transaction_state.", v.at_least(1)),
    _d("transaction.state.log.min.isr", T.INT, 2, "min.insync.replicas of __transaction_state.", v.at_least(1)),
    # ---- transactions (issue 12)
    _d("transaction.max.timeout.ms", T.INT, 900000, "Largest transaction.timeout.ms a transactional producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it).", v.at_least(1)),
    _d("transactional.id.expiration.ms", T.INT, 604800000, "How long a transactional id without an open transaction is kept after its last update.", v.at_least(1)),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000, "How often open transactions past their timeout are aborted (fencing their producer).", v.at_least(1)),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000, "How often expired transactional ids are removed.", v.at_least(1)),
    _d("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout a member may ask for."),
    _d("group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout a member may ask for."),
    _d("group.consumer.session.timeout.ms", T.INT, 45000, "Session timeout of consumer-protocol (KIP-848) group members: one missing its heartbeats this long is fenced.", v.at_least(1)),
    _d("group.consumer.heartbeat.interval.ms", T.INT, 5000, "Heartbeat interval the coordinator gives consumer-protocol (KIP-848) group members.", v.at_least(1)),
    _d("group.consumer.assignors", T.LIST, ['uniform', 'range'], "Server-side assignors of consumer-protocol (KIP-848) groups; the first is the default.", v.each_one_of("uniform", "range")),
    # ---- authorization (issue 11)
    _d("authorizer.class.name", T.STRING, "", "Turns ACL authorization on: org.apache.kafka.metadata.authorizer.StandardAuthorizer or kafka.security.authorizer.AclAuthorizer (both are the standard ACL authorizer here); empty allows everything.", v.authorizer_class),
    _d("super.users", T.STRING, None, "Principals (User:name) separated by semicolons that every ACL check allows."),
    _d("allow.everyone.if.no.acl.found", T.BOOLEAN, False, "Allow an operation on a resource that no ACL applies to; otherwise only ACLs and super users allow."),
]
# fmt: on

CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

PER_LISTENER_KEYS: frozenset[str] = frozenset(d.name for d in _DEFS if d.per_listener)
"""Keys that may be given as `listener.name.<listener>.<key>` to override the
broker-wide value for one listener."""

PER_MECHANISM_KEYS: frozenset[str] = frozenset(d.name for d in _DEFS if d.per_mechanism)
"""Keys that may also be given as `listener.name.<listener>.<mechanism>.<key>`
(e.g. `listener.name.sasl_ssl.plain.sasl.jaas.config`), as Kafka allows."""

DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(d.name for d in _DEFS if d.is_dynamic)
"""Broker keys this broker can change at runtime (IncrementalAlterConfigs/AlterConfigs)."""

THREAD_COUNT_CONFIGS = frozenset({"num.network.threads", "num.io.threads"})
"""Dynamic keys that resize a pool (Kafka's half..double rule applies)."""

LEADER_REPLICATION_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate"
REPLICATION_THROTTLE_CONFIGS = frozenset(
    {LEADER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_RATE}
)
"""Dynamic keys of the reassignment throttles (Kafka's ReplicationQuotaManager bounds)."""

CONNECTION_QUOTA_CONFIGS = (
    DYNAMIC_BROKER_CONFIGS - THREAD_COUNT_CONFIGS - REPLICATION_THROTTLE_CONFIGS
)
"""Dynamic keys of the acceptors' connection quotas (Kafka's DynamicConnectionQuota)."""

TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {}
"""Each topic key's broker synonyms, in Kafka's precedence order."""
for _definition in _DEFS:
    if _definition.topic is not None:
        TOPIC_SYNONYMS[_definition.topic] = (
            *TOPIC_SYNONYMS.get(_definition.topic, ()),
            _definition.name,
        )

LISTENER_PREFIX_RE = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")


def find_def(key: str) -> ConfigDef | None:
    """The definition of `key`, a listener's (or a listener's mechanism's) override
    included under its own name; None for an unknown key."""
    definition = CONFIG_DEFS.get(key)
    if definition is not None:
        return definition
    match = LISTENER_PREFIX_RE.match(key)
    if match and match.group(2) in PER_LISTENER_KEYS:
        return attrs.evolve(CONFIG_DEFS[match.group(2)], name=key)
    if match:
        _, dot, rest = match.group(2).partition(".")
        if dot and rest in PER_MECHANISM_KEYS:
            return attrs.evolve(CONFIG_DEFS[rest], name=key)
    return None


def listener_key(listener_name: str, key: str) -> str:
    return f"listener.name.{listener_name.lower()}.{key}"


__all__ = [
    "CONFIG_DEFS",
    "CONNECTION_QUOTA_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "FOLLOWER_REPLICATION_THROTTLED_RATE",
    "LEADER_REPLICATION_THROTTLED_RATE",
    "PER_LISTENER_KEYS",
    "PER_MECHANISM_KEYS",
    "REPLICATION_THROTTLE_CONFIGS",
    "THREAD_COUNT_CONFIGS",
    "TOPIC_SYNONYMS",
    "ConfigDef",
    "DynamicMode",
    "find_def",
    "listener_key",
]
