"""The record-batch package: the encoder and the one record walk agree on every field and
codec; the LogValidator answers any corruption with a Kafka error, never an exception;
Produce reads each partition's header once and the log's append validates each batch once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.handlers.produce import ProduceHandler
from broker.protocol.compression import CompressionType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import ProduceRequest, ProduceResponse
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.record_batch import layout, record_sinks, validator
from broker.protocol.record_batch.batch_checks import read_batch_header
from broker.protocol.record_batch.encoder import encode_batch
from broker.protocol.record_batch.errors import InvalidRecordsError
from broker.protocol.record_batch.layout import CRC_OFFSET, LOG_APPEND_TIME, write_crc
from broker.protocol.record_batch.record_sinks import Record, decode_records, iter_records
from broker.protocol.record_batch.validator import LogValidator
from tests.log.helpers import config, open_manager

ints16 = st.integers(min_value=-(2**15), max_value=2**15 - 1)
ints32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
ints64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
nullable_bytes = st.none() | st.binary(max_size=40) | st.just(b"x" * 200)
record_headers = st.lists(
    st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=12)), max_size=3
).map(tuple)


@st.composite
def records(draw: st.DrawFn) -> list[Record]:
    """Records with every field drawn, offset deltas ascending with gaps."""
    count = draw(st.integers(min_value=1, max_value=8))
    deltas = sorted(draw(st.sets(st.integers(0, 2**20), min_size=count, max_size=count)))
    return [
        Record(
            offset_delta=delta,
            timestamp_delta=draw(st.integers(min_value=-(2**40), max_value=2**40)),
            key=draw(nullable_bytes),
            value=draw(nullable_bytes),
            headers=draw(record_headers),
            attributes=draw(st.integers(0, 255)),
        )
        for delta in deltas
    ]


@settings(max_examples=150)
@given(
    records(),
    st.sampled_from(list(CompressionType)),
    st.fixed_dictionaries(
        {
            "base_offset": st.integers(0, 2**62),
            "base_timestamp": st.integers(0, 2**50),
            "producer_id": ints64,
            "producer_epoch": ints16,
            "base_sequence": ints32,
            "is_transactional": st.booleans(),
            "is_control": st.booleans(),
            "partition_leader_epoch": ints32,
            "timestamp_type": st.sampled_from([0, 1]),
        }
    ),
)
def test_every_field_survives_encoding_and_the_walk_with_every_codec(
    written: list[Record], codec: CompressionType, fields: dict[str, Any]
) -> None:
    batch = encode_batch(written, compression=codec, **fields)
    header = read_batch_header(batch)
    assert decode_records(batch, header) == written
    assert header.compression == codec
    assert header.size_in_bytes == len(batch)
    assert header.record_count == len(written)
    assert header.last_offset_delta == written[-1].offset_delta
    assert (header.is_transactional, header.is_control, header.timestamp_type) == (
        fields["is_transactional"],
        fields["is_control"],
        fields["timestamp_type"],
    )
    for name in ("base_offset", "base_timestamp", "producer_id", "producer_epoch"):
        assert getattr(header, name) == fields[name]
    assert (header.base_sequence, header.partition_leader_epoch) == (
        fields["base_sequence"],
        fields["partition_leader_epoch"],
    )
    absolute = list(iter_records(batch, header))
    assert [r.offset for r in absolute] == [fields["base_offset"] + r.offset_delta for r in written]
    if fields["timestamp_type"] == LOG_APPEND_TIME:
        assert {r.timestamp for r in absolute} == {header.max_timestamp}
    else:
        expected = [fields["base_timestamp"] + r.timestamp_delta for r in written]
        assert [r.timestamp for r in absolute] == expected


def _verdict(buf: bytes | bytearray) -> ErrorCode | None:
    """What a Produce (v7+) answers for this partition's records, None when valid; any
    other exception fails the test."""
    validator = LogValidator(compacted=True, timestamp_before_max_ms=2**40)
    try:
        validated = validator.check_batch(buf, validator.read_header(buf))
    except InvalidRecordsError as exc:
        return exc.error_code
    try:
        validator.check_records(validated, now_ms=2**41)
    except InvalidRecordsError as exc:
        assert exc.record_index is not None
        return exc.error_code
    return None


client_records = st.lists(st.tuples(nullable_bytes, record_headers), min_size=1, max_size=6).map(
    lambda rows: [
        Record(offset_delta=i, timestamp_delta=i, key=key, value=b"v", headers=headers)
        for i, (key, headers) in enumerate(rows)
    ]
)


@settings(max_examples=25)
@given(client_records, st.sampled_from(list(CompressionType)), st.integers(1, 255))
def test_every_byte_flipped_is_corrupt_or_still_a_valid_batch(
    written: list[Record], codec: CompressionType, mask: int
) -> None:
    batch = encode_batch(written, compression=codec, base_timestamp=2**40, producer_id=-1)
    for position in range(len(batch)):
        flipped = bytearray(batch)
        flipped[position] ^= mask
        verdict = _verdict(flipped)
        if position >= CRC_OFFSET:  # the CRC and what it covers
            assert verdict == ErrorCode.CORRUPT_MESSAGE, position
        else:  # offset, length, leader epoch, magic: framing codes, or still valid
            assert verdict in (
                None,
                ErrorCode.CORRUPT_MESSAGE,
                ErrorCode.INVALID_RECORD,
                ErrorCode.MESSAGE_TOO_LARGE,
            ), position


@settings(max_examples=60)
@given(client_records, st.data())
def test_record_bytes_corrupted_under_a_good_crc_are_refused_as_corrupt_never_raised(
    written: list[Record], data: st.DataObject
) -> None:
    batch = bytearray(encode_batch(written, base_timestamp=2**40))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(layout.BATCH_HEADER_SIZE, len(batch) - 1))
        batch[position] ^= data.draw(st.integers(1, 255))
    write_crc(batch)
    # A keyless record is INVALID_RECORD on this compacted topic (LogValidator.validateKey);
    # a timestamp delta changed past the allowed difference is INVALID_TIMESTAMP.
    assert _verdict(batch) in (
        None,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_TIMESTAMP,
    )


class _CountingHeader:
    """The layout's header struct, counting how often a header is unpacked."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.unpacked = 0

    def unpack_from(self, buf: Any, offset: int = 0) -> tuple[Any, ...]:
        self.unpacked += 1
        result: tuple[Any, ...] = self.real.unpack_from(buf, offset)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class _Request:
    def __init__(self, body: ProduceRequest) -> None:
        self.body = body
        self.api_version = 9
        self.bulk_on_loop = False


async def test_produce_reads_each_partitions_header_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_manager(config(tmp_path)) as manager:
        await manager.create_topic("t", 2)
        handler = ProduceHandler(manager)
        counting = _CountingHeader(layout.HEADER)
        monkeypatch.setattr(layout, "HEADER", counting)
        batches = [
            encode_batch(
                [Record(0, 0, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0
            ),
            encode_batch([Record(0, 0, b"k", b"v"), Record(1, 1, None, b"w")]),
        ]
        body = ProduceRequest(
            acks=-1,
            topic_data=(
                TopicProduceData(
                    name="t",
                    partition_data=tuple(
                        PartitionProduceData(index=i, records=b) for i, b in enumerate(batches)
                    ),
                ),
            ),
        )
        response = await handler.handle(_Request(body))  # type: ignore[arg-type]
        assert isinstance(response, ProduceResponse)
        answers = response.responses[0].partition_responses
        assert [p.error_code for p in answers] == [ErrorCode.NONE, ErrorCode.NONE]
        assert counting.unpacked == len(batches)
        log = manager.partition("t", 1)
        assert log is not None and log.log_end_offset == 2


def _counted(calls: Counter[str], name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return real(*args, **kwargs)

    return counting


async def test_the_logs_append_validates_each_batch_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Produce hands each batch to the log's append, which runs the LogValidator once
    (Kafka's UnifiedLog.append): one batch check with one walk of the records, one check
    of the records' timestamps and keys, whether the batch is stored or refused."""
    async with open_manager(config(tmp_path)) as manager:
        limits = {"cleanup.policy": "compact", "message.timestamp.before.max.ms": "86400000"}
        await manager.create_topic("t", 3, configs=limits)
        handler = ProduceHandler(manager)
        calls: Counter[str] = Counter()
        monkeypatch.setattr(
            validator, "walk_batch", _counted(calls, "walk", record_sinks.walk_batch)
        )
        for method in ("check_batch", "check_records"):
            real = getattr(LogValidator, method)
            monkeypatch.setattr(LogValidator, method, _counted(calls, method, real))
        now = manager.clock()
        batches = [
            encode_batch(
                [Record(0, 0, b"k", b"v")],
                base_timestamp=now,
                producer_id=7,
                producer_epoch=0,
                base_sequence=0,
            ),
            encode_batch([Record(0, 0, b"k", b"v"), Record(1, 1, b"j", b"w")], base_timestamp=now),
            encode_batch([Record(0, 0, b"k", b"v"), Record(1, 1, None, b"w")], base_timestamp=now),
        ]
        body = ProduceRequest(
            acks=-1,
            topic_data=(
                TopicProduceData(
                    name="t",
                    partition_data=tuple(
                        PartitionProduceData(index=i, records=b) for i, b in enumerate(batches)
                    ),
                ),
            ),
        )
        response = await handler.handle(_Request(body))  # type: ignore[arg-type]
        assert isinstance(response, ProduceResponse)
        answers = response.responses[0].partition_responses
        assert [p.error_code for p in answers] == [
            ErrorCode.NONE,
            ErrorCode.NONE,
            ErrorCode.INVALID_RECORD,  # the keyless record of a compacted topic
        ]
        assert answers[2].record_errors[0].batch_index == 1
        assert calls == {"walk": 3, "check_batch": 3, "check_records": 3}
        assert [manager.partition("t", i).log_end_offset for i in range(3)] == [1, 2, 0]  # type: ignore[union-attr]
