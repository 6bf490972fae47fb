"""The Kafka calls the pipeline makes, blocking, on one broker connection.

Used on the driver (Metadata and ListOffsets to plan micro-batches) and on the
executors (Fetch to read a range, Produce to write). The connection goes to the
first reachable bootstrap address and stays there: every partition's leader is
that broker in a single-broker cluster, which is what this pipeline targets.
Versions are negotiated with ApiVersions, capped where a newer version would
switch to topic ids (Fetch 13+).
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import attrs

from broker.client.bootstrap_servers import parse_bootstrap_servers
from broker.client.sasl_client import (
    SASL_HANDSHAKE_VERSION,
    SaslAuthenticationError,
    SaslAuthenticator,
    reauthentication_due,
)
from broker.client.security_config import PLAINTEXT_CONFIG, SaslCredentials, SecurityConfig
from broker.client.tls_context import build_ssl_context
from broker.pipeline.wire import BlockingConnection
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from broker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from broker.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.messages.metadata_request import MetadataRequestTopic
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

TopicPartition = tuple[str, int]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

# The newest version of each API this client speaks (capped below topic-id-only versions).
_MAX_VERSIONS = {
    ProduceRequest.API_KEY: 9,
    FetchRequest.API_KEY: 12,
    ListOffsetsRequest.API_KEY: 7,
    MetadataRequest.API_KEY: 12,
    InitProducerIdRequest.API_KEY: 4,
    CreateTopicsRequest.API_KEY: 7,
    DeleteRecordsRequest.API_KEY: 2,
    SaslHandshakeRequest.API_KEY: SASL_HANDSHAKE_VERSION,
    SaslAuthenticateRequest.API_KEY: 2,
}
_RETRIABLE = {
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


class KafkaClientError(Exception):
    """A Kafka error code answered for a request the pipeline needed."""

    def __init__(self, error_code: int, what: str) -> None:
        try:
            name = ErrorCode(error_code).name
        except ValueError:
            name = f"error {error_code}"
        super().__init__(f"{what}: {name}")
        self.error_code = error_code

    @property
    def retriable(self) -> bool:
        return self.error_code in _RETRIABLE


@attrs.frozen
class FetchedPartition:
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes | bytearray | memoryview


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """`kafka.bootstrap.servers` as `broker client` reads its list: a missing port is
    9092, IPv6 as ``[addr]:port``; a ValueError (BootstrapServersError) when unusable."""
    return parse_bootstrap_servers(servers, "kafka.bootstrap.servers")


class KafkaClient:
    """One broker connection with the requests the pipeline uses; a context manager."""

    def __init__(
        self,
        connection: BlockingConnection,
        versions: dict[int, int],
        credentials: SaslCredentials | None = None,
        reauthenticate_at: float | None = None,
    ) -> None:
        self._connection = connection
        self._versions = versions
        self._credentials = credentials
        self._reauthenticate_at = reauthenticate_at

    @classmethod
    def connect(
        cls,
        bootstrap: str,
        client_id: str = "trio-kafka-pipeline",
        timeout_s: float = 30.0,
        security: SecurityConfig = PLAINTEXT_CONFIG,
    ) -> KafkaClient:
        """Connect to the first reachable bootstrap server: TLS, ApiVersions, then SASL.

        A TLS or authentication failure is not "unreachable": it is raised at once (an
        ``ssl.SSLError`` or a KafkaClientError), as another address would fail alike.
        """
        context = build_ssl_context(security.tls) if security.tls is not None else None
        failures = []
        for host, port in parse_bootstrap(bootstrap):
            try:
                connection = BlockingConnection.connect(host, port, timeout_s, client_id, context)
            except ssl.SSLError:
                raise
            except OSError as exc:
                failures.append(f"{host}:{port}: {exc}")
                continue
            try:
                versions = _negotiate(connection)
                due = None
                if security.sasl is not None:
                    due = _authenticate(connection, versions, security.sasl)
                return cls(connection, versions, security.sasl, due)
            except BaseException:
                connection.close()
                raise
        raise ConnectionError(f"no bootstrap server reachable ({'; '.join(failures)})")

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _request(self, body: Any) -> Any:
        """One request at the negotiated version, logging in again first when the SASL
        session is about to expire (a long read of an offset range outlives it)."""
        due = self._reauthenticate_at
        if due is not None and self._credentials is not None and time.monotonic() >= due:
            self._reauthenticate_at = _authenticate(
                self._connection, self._versions, self._credentials
            )
        return self._connection.request(body, self._version(int(body.API_KEY)))

    def _version(self, api_key: int) -> int:
        version = self._versions.get(api_key)
        if version is None:
            raise KafkaClientError(ErrorCode.UNSUPPORTED_VERSION, f"broker lacks api {api_key}")
        return version

    # ------------------------------------------------------------ metadata

    def partitions_for(
        self, topics: list[str] | None, *, auto_create: bool = False
    ) -> dict[str, int]:
        """Partition count of each named topic (all topics when None); missing ones left out.

        With ``auto_create`` the request asks the broker to create missing topics, as a Kafka
        producer's Metadata does; a broker with auto-creation off still leaves them out.
        """
        if topics is not None and not topics:
            return {}
        body = MetadataRequest(
            topics=None
            if topics is None
            else tuple(MetadataRequestTopic(name=name) for name in topics),
            allow_auto_topic_creation=auto_create,
        )
        response = self._request(body)
        result = {}
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE and topic.name is not None:
                result[topic.name] = len(topic.partitions)
            elif topic.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,):
                raise KafkaClientError(topic.error_code, f"metadata for topic {topic.name}")
        return result

    # ---------------------------------------------------------- list offsets

    def list_offsets(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offset per partition for a timestamp (-2 earliest, -1 latest); -1 when none."""
        if not timestamps:
            return {}
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for (topic, partition), ts in timestamps.items():
            by_topic.setdefault(topic, []).append(
                ListOffsetsPartition(partition_index=partition, timestamp=ts)
            )
        body = ListOffsetsRequest(
            replica_id=-1,
            topics=tuple(
                ListOffsetsTopic(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )
        response = self._request(body)
        result = {}
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != ErrorCode.NONE:
                    raise KafkaClientError(
                        part.error_code, f"list offsets for {topic.name}-{part.partition_index}"
                    )
                offset = part.offset
                if offset == -1 and part.old_style_offsets:
                    offset = part.old_style_offsets[0]
                result[(topic.name, part.partition_index)] = offset
        missing = set(timestamps) - set(result)
        if missing:
            raise KafkaClientError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no offsets for {missing}"
            )
        return result

    # ---------------------------------------------------------------- fetch

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 8 << 20,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
    ) -> FetchedPartition:
        body = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=0,
            topics=(
                FetchTopic(
                    topic=topic,
                    partitions=(
                        FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                        ),
                    ),
                ),
            ),
        )
        response = self._request(body)
        if response.error_code != ErrorCode.NONE:
            raise KafkaClientError(response.error_code, f"fetch {topic}-{partition}")
        for topic_response in response.responses:
            for part in topic_response.partitions:
                if part.partition_index == partition:
                    return FetchedPartition(
                        part.error_code,
                        part.high_watermark,
                        part.log_start_offset,
                        part.records if part.records is not None else b"",
                    )
        raise KafkaClientError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no data for {topic}-{partition}")

    # -------------------------------------------------------------- produce

    def init_producer_id(self) -> tuple[int, int]:
        """A new idempotent producer id and epoch."""
        body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
        response = self._request(body)
        if response.error_code != ErrorCode.NONE:
            raise KafkaClientError(response.error_code, "init producer id")
        return int(response.producer_id), int(response.producer_epoch)

    def produce(
        self, batches: dict[TopicPartition, bytes], *, acks: int = -1, timeout_ms: int = 30000
    ) -> dict[TopicPartition, int]:
        """Write one batch per partition in one request; base offsets, errors raised."""
        by_topic: dict[str, list[PartitionProduceData]] = {}
        for (topic, partition), batch in batches.items():
            by_topic.setdefault(topic, []).append(
                PartitionProduceData(index=partition, records=batch)
            )
        body = ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=tuple(
                TopicProduceData(name=name, partition_data=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )
        response = self._request(body)
        result = {}
        for topic in response.responses:
            for part in topic.partition_responses:
                # A retried batch the broker already holds is a success for an idempotent producer.
                if part.error_code not in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    detail = f" ({part.error_message})" if part.error_message else ""
                    raise KafkaClientError(
                        part.error_code, f"produce to {topic.name}-{part.index}{detail}"
                    )
                result[(topic.name, part.index)] = int(part.base_offset)
        return result

    # ---------------------------------------------------------------- admin

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> bool:
        """Create a topic; False when it already exists."""
        body = CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=tuple(
                        CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                    ),
                ),
            ),
            timeout_ms=30000,
        )
        response = self._request(body)
        for result in response.topics:
            if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return False
            if result.error_code != ErrorCode.NONE:
                raise KafkaClientError(
                    result.error_code, f"create topic {name}: {result.error_message or ''}"
                )
        return True

    def delete_records(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """DeleteRecords: new low watermark per partition."""
        by_topic: dict[str, list[DeleteRecordsPartition]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                DeleteRecordsPartition(partition_index=partition, offset=offset)
            )
        body = DeleteRecordsRequest(
            topics=tuple(
                DeleteRecordsTopic(name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
            timeout_ms=30000,
        )
        response = self._request(body)
        result = {}
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != ErrorCode.NONE:
                    raise KafkaClientError(
                        part.error_code, f"delete records {topic.name}-{part.partition_index}"
                    )
                result[(topic.name, part.partition_index)] = int(part.low_watermark)
        return result


def _authenticate(
    connection: BlockingConnection, versions: dict[int, int], credentials: SaslCredentials
) -> float | None:
    """Log in; returns when to do it again (time.monotonic), None if the session lasts."""
    if versions.get(SaslHandshakeRequest.API_KEY) != SASL_HANDSHAKE_VERSION:
        raise KafkaClientError(ErrorCode.UNSUPPORTED_VERSION, "broker lacks SaslHandshake v1")
    version = versions.get(SaslAuthenticateRequest.API_KEY)
    if version is None:
        raise KafkaClientError(ErrorCode.UNSUPPORTED_VERSION, "broker lacks SaslAuthenticate")
    try:
        authenticator = SaslAuthenticator(credentials, version)
        handshake = connection.request(authenticator.handshake_request(), SASL_HANDSHAKE_VERSION)
        authenticator.on_handshake_response(handshake)
        while (body := authenticator.next_request()) is not None:
            authenticator.on_authenticate_response(connection.request(body, version))
    except SaslAuthenticationError as exc:
        raise KafkaClientError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
    return reauthentication_due(time.monotonic(), authenticator.session_lifetime_ms)


def _negotiate(connection: BlockingConnection) -> dict[int, int]:
    response = connection.request(
        ApiVersionsRequest(
            client_software_name="trio-kafka-pipeline", client_software_version="0.1"
        ),
        3,
    )
    if response.error_code != ErrorCode.NONE:
        raise KafkaClientError(response.error_code, "api versions")
    versions = {}
    for api in response.api_keys:
        mine = _MAX_VERSIONS.get(api.api_key)
        if mine is not None and api.min_version <= mine:
            versions[api.api_key] = min(mine, api.max_version)
    return versions
