"""The options of the source and the sink, under Spark's Kafka names.

Spark hands a Python data source its options with lower-cased keys and string
values; parsing happens once, on the driver, into frozen value classes that
travel to the executors inside the (pickled) input partitions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from broker.client.security_config import (
    PLAINTEXT_CONFIG,
    SecurityConfig,
    SecurityConfigError,
    is_security_property,
    parse_security_properties,
)
from broker.pipeline.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartition,
    offsets_from_json,
    partitions_from_json,
)

FORMAT_NAME = "trio-kafka"
# `__` as Kafka's internal topics: the broker marks it internal in Metadata and
# `topics list` / `subscribePattern` leave it out.
DEFAULT_COMMIT_TOPIC = "__trio_kafka_sink_commits"
# The name before it was internal; replays of older checkpoints still read its markers.
LEGACY_COMMIT_TOPIC = "_trio_kafka_sink_commits"
DEFAULT_FETCH_MAX_BYTES = 4 << 20
KAFKA_PREFIX = "kafka."


class OptionError(ValueError):
    """An option that is missing, unknown in combination, or malformed."""


@attrs.frozen
class StartSpec:
    """Where reading starts (or ends): earliest, latest, offsets or a timestamp.

    ``kind`` is "earliest", "latest", "offsets" (``offsets`` per partition, -2/-1
    allowed), "timestamp" (one ``timestamp`` for every partition) or
    "timestamps" (``offsets`` holds a timestamp per partition).
    """

    kind: str
    offsets: PartitionOffsets = attrs.field(factory=dict)
    timestamp: int = 0


@attrs.frozen
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: StartSpec = StartSpec("latest")
    ending: StartSpec = StartSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    poll_timeout_ms: int = 120_000
    security: SecurityConfig = PLAINTEXT_CONFIG

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        options = {k.lower(): v for k, v in raw.items()}
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise OptionError("option 'kafka.bootstrap.servers' is required")
        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
        if len(strategies) != 1:
            raise OptionError(
                "exactly one of 'subscribe', 'subscribePattern' or 'assign' must be given"
                f" (got {strategies or 'none'})"
            )
        subscribe: tuple[str, ...] = ()
        pattern = None
        assign: tuple[TopicPartition, ...] = ()
        if "subscribe" in options:
            subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
            if not subscribe:
                raise OptionError("'subscribe' names no topic")
        elif "subscribepattern" in options:
            pattern = options["subscribepattern"]
            try:
                re.compile(pattern)
            except re.error as exc:
                raise OptionError(f"'subscribePattern' is not a regular expression: {exc}") from exc
        else:
            try:
                assign = tuple(partitions_from_json(options["assign"]))
            except ValueError as exc:
                raise OptionError(f"'assign': {exc}") from exc
        starting = _start_spec(options, "starting", "latest" if streaming else "earliest")
        ending = _start_spec(options, "ending", "latest")
        if not streaming and starting.kind == "latest":
            raise OptionError("startingOffsets=latest is not valid for a batch query")
        if not streaming and ending.kind == "earliest":
            raise OptionError("endingOffsets=earliest is not valid for a batch query")
        if streaming and ("endingoffsets" in options or "endingtimestamp" in options):
            raise OptionError("'endingOffsets' is for batch queries only")
        return cls(
            bootstrap_servers=bootstrap,
            subscribe=subscribe,
            subscribe_pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=_positive(options, "maxoffsetspertrigger"),
            min_partitions=_positive(options, "minpartitions"),
            include_headers=_bool(options, "includeheaders", False),
            fail_on_data_loss=_bool(options, "failondataloss", True),
            fetch_max_bytes=_positive(options, "fetch.max.bytes") or DEFAULT_FETCH_MAX_BYTES,
            poll_timeout_ms=_positive(options, "kafkaconsumer.polltimeoutms") or 120_000,
            security=security_from_options(options),
        )


@attrs.frozen
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    commit_topic: str = DEFAULT_COMMIT_TOPIC
    checkpoint_location: str | None = None
    max_request_bytes: int = 1 << 20
    # For batch writes from foreachBatch: the identity that makes a replay a no-op.
    query_id: str | None = None
    batch_id: int | None = None
    security: SecurityConfig = PLAINTEXT_CONFIG

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> SinkOptions:
        options = {k.lower(): v for k, v in raw.items()}
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise OptionError("option 'kafka.bootstrap.servers' is required")
        return cls(
            bootstrap_servers=bootstrap,
            topic=options.get("topic") or None,
            commit_topic=options.get("sink.committopic") or DEFAULT_COMMIT_TOPIC,
            checkpoint_location=options.get("checkpointlocation") or options.get("path"),
            max_request_bytes=_positive(options, "kafka.max.request.size") or (1 << 20),
            query_id=options.get("sink.queryid") or None,
            batch_id=_batch_id(options),
            security=security_from_options(options),
        )


def security_options(raw: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.`-prefixed security options (security.protocol, sasl.*, ssl.*), as given."""
    return {
        key: value
        for key, value in raw.items()
        if key.lower().startswith(KAFKA_PREFIX)
        and is_security_property(key.lower()[len(KAFKA_PREFIX) :])
    }


def security_from_options(raw: Mapping[str, str]) -> SecurityConfig:
    """TLS and SASL settings from Spark's Kafka option names (`kafka.security.protocol`,
    `kafka.sasl.jaas.config`, `kafka.ssl.truststore.*` in PEM form, ...)."""
    properties = {
        key.lower()[len(KAFKA_PREFIX) :]: value for key, value in security_options(raw).items()
    }
    try:
        return parse_security_properties(properties, prefix=KAFKA_PREFIX)
    except SecurityConfigError as exc:
        raise OptionError(str(exc)) from None


def _batch_id(options: Mapping[str, str]) -> int | None:
    if "sink.batchid" not in options:
        return None
    try:
        return int(options["sink.batchid"])
    except ValueError:
        raise OptionError(
            f"'sink.batchId' must be an integer, got {options['sink.batchid']!r}"
        ) from None


def _start_spec(options: Mapping[str, str], which: str, default: str) -> StartSpec:
    offsets_key = f"{which}offsets"
    timestamp_key = f"{which}timestamp"
    by_timestamp_key = f"{which}offsetsbytimestamp"
    given = [k for k in (offsets_key, timestamp_key, by_timestamp_key) if k in options]
    if len(given) > 1:
        raise OptionError(f"only one of {given} may be given")
    if timestamp_key in options:
        try:
            return StartSpec("timestamp", timestamp=int(options[timestamp_key]))
        except ValueError:
            raise OptionError(f"'{timestamp_key}' must be milliseconds since the epoch") from None
    if by_timestamp_key in options:
        try:
            return StartSpec("timestamps", offsets=offsets_from_json(options[by_timestamp_key]))
        except ValueError as exc:
            raise OptionError(f"'{by_timestamp_key}': {exc}") from exc
    value = options.get(offsets_key, default).strip()
    if value.lower() in ("earliest", "latest"):
        return StartSpec(value.lower())
    try:
        offsets = offsets_from_json(value)
    except ValueError as exc:
        raise OptionError(f"'{offsets_key}' must be earliest, latest or JSON: {exc}") from exc
    if any(offset < EARLIEST for offset in offsets.values()):
        raise OptionError(f"'{offsets_key}': offsets below -2 are not valid")
    return StartSpec("offsets", offsets=offsets)


def _positive(options: Mapping[str, str], key: str) -> int | None:
    if key not in options:
        return None
    try:
        value = int(options[key])
    except ValueError:
        raise OptionError(f"'{key}' must be an integer, got {options[key]!r}") from None
    if value <= 0:
        raise OptionError(f"'{key}' must be positive, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in options:
        return default
    value = options[key].strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"'{key}' must be true or false, got {options[key]!r}")
    return value == "true"


__all__ = [
    "DEFAULT_COMMIT_TOPIC",
    "EARLIEST",
    "FORMAT_NAME",
    "LATEST",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "StartSpec",
    "security_from_options",
    "security_options",
]
