"""validate_records (the Produce path's record walk) agrees with decode_records exactly.

The broker validates records without building them; these tests hold the walk to the
reference decoder: same acceptance, same error code, on valid batches of every codec,
on batches with mutated or truncated record bytes, and on arbitrary record sections.
Every build of the walk is held to it: the pure module always, and the mypyc build
(the one the broker loaded, or one built here when a C compiler and mypyc are present).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import native
from broker.protocol.compression import CompressionType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.record_batch import walk as record_walk
from broker.protocol.records import (
    InvalidRecordsError,
    Record,
    decode_records,
    encode_batch,
    read_batch_header,
    validate_records,
)
from tests.records.helpers import build_v2_batch, fix_crc, record_lists
from tools import build_native

LIMIT = 1 << 20
# The equivalence is the point of this file: more examples than the profile's default.
EXAMPLES = settings(max_examples=300)


def _load_extension(path: Path) -> ModuleType:
    # The name must end as the extension's init function does (walk_native).
    spec = importlib.util.spec_from_file_location("walk_native", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _builds(scratch: Path) -> list[ModuleType]:
    found = [record_walk]
    loaded = native.load_native(record_walk)
    if loaded is not record_walk:
        found.append(loaded)
    elif build_native.compiler_available() and build_native.mypyc_available():
        found.append(_load_extension(build_native.build(scratch)))
    return found


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> list[ModuleType]:
    return _builds(tmp_path_factory.mktemp("native"))


def _decoder_verdict(buf: bytes) -> ErrorCode | None:
    try:
        decode_records(buf, read_batch_header(buf), max_decompressed_size=LIMIT)
    except InvalidRecordsError as exc:
        return exc.error_code
    return None


def _walk_verdict(buf: bytes, build: ModuleType) -> tuple[ErrorCode, str] | None:
    try:
        validate_records(buf, read_batch_header(buf), max_decompressed_size=LIMIT, walker=build)
    except InvalidRecordsError as exc:
        return exc.error_code, exc.message
    return None


def _same_verdicts(buf: bytes, builds: list[ModuleType]) -> ErrorCode | None:
    """Every build's verdict equals the decoder's (builds agree on the message too);
    returns the verdict."""
    expected = _decoder_verdict(buf)
    verdicts = [_walk_verdict(buf, build) for build in builds]
    assert all(v == verdicts[0] for v in verdicts), verdicts
    assert (None if verdicts[0] is None else verdicts[0][0]) == expected
    # The default walker (the broker's) gives the same verdict as well.
    try:
        validate_records(buf, read_batch_header(buf), max_decompressed_size=LIMIT)
        assert expected is None
    except InvalidRecordsError as exc:
        assert exc.error_code == expected
    return expected


def _with_records_section(section: bytes, count: int) -> bytes:
    return build_v2_batch(section, record_count=count, last_offset_delta=max(count - 1, 0))


@EXAMPLES
@given(records=record_lists(), kind=st.sampled_from(list(CompressionType)))
def test_every_valid_batch_is_accepted_by_both(
    builds: list[ModuleType], records: list[Record], kind: CompressionType
) -> None:
    buf = encode_batch(records, compression=kind, base_timestamp=1_700_000_000_000)
    assert _same_verdicts(buf, builds) is None


@EXAMPLES
@given(records=record_lists(), kind=st.sampled_from(list(CompressionType)), data=st.data())
def test_mutated_record_bytes_get_the_same_verdict(
    builds: list[ModuleType], records: list[Record], kind: CompressionType, data: st.DataObject
) -> None:
    buf = bytearray(encode_batch(records, compression=kind, base_timestamp=0))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        pos = data.draw(st.integers(min_value=61, max_value=len(buf) - 1))
        buf[pos] = data.draw(st.integers(min_value=0, max_value=255))
    mutated = fix_crc(buf)
    _same_verdicts(mutated, builds)


@EXAMPLES
@given(records=record_lists(), data=st.data())
def test_truncated_or_padded_record_sections_get_the_same_verdict(
    builds: list[ModuleType], records: list[Record], data: st.DataObject
) -> None:
    section = encode_batch(records, base_timestamp=0)[61:]
    cut = data.draw(st.integers(min_value=0, max_value=len(section)))
    padding = data.draw(st.binary(max_size=8))
    count = data.draw(st.sampled_from([len(records), len(records) - 1, len(records) + 1]))
    buf = _with_records_section(section[:cut] + padding, max(count, 1))
    _same_verdicts(buf, builds)


@EXAMPLES
@given(section=st.binary(max_size=120), count=st.integers(min_value=1, max_value=20))
def test_arbitrary_record_sections_get_the_same_verdict(
    builds: list[ModuleType], section: bytes, count: int
) -> None:
    buf = _with_records_section(section, count)
    _same_verdicts(buf, builds)


@EXAMPLES
@given(
    varints=st.lists(
        st.integers(min_value=-(2**70), max_value=2**70).map(lambda v: v & (2**80 - 1)),
        min_size=1,
        max_size=8,
    ),
    count=st.integers(min_value=1, max_value=3),
)
def test_long_and_overlong_varints_get_the_same_verdict(
    builds: list[ModuleType], varints: list[int], count: int
) -> None:
    # Raw varints of any length (up to 12 bytes) exercise the slow path's limits.
    section = bytearray()
    for value in varints:
        while value >= 0x80:
            section.append((value & 0x7F) | 0x80)
            value >>= 7
        section.append(value)
    buf = _with_records_section(bytes(section), count)
    _same_verdicts(buf, builds)


def test_a_record_claiming_more_bytes_than_the_batch_holds_is_corrupt(
    builds: list[ModuleType],
) -> None:
    # Record length 100 (zigzag 200 = 0xC8 0x01), then only seven bytes.
    buf = _with_records_section(bytes([0xC8, 0x01]) + bytes(7), 1)
    assert _same_verdicts(buf, builds) == ErrorCode.CORRUPT_MESSAGE


def test_an_invalid_header_key_is_refused_by_both(builds: list[ModuleType]) -> None:
    # One record: attributes, ts 0, offset 0, key null, value null, 1 header whose key
    # is the invalid UTF-8 byte 0xFF and whose value is null.
    body = bytes([0, 0, 0, 1, 1, 2, 2, 0xFF, 1])
    buf = _with_records_section(bytes([len(body) * 2]) + body, 1)
    assert _same_verdicts(buf, builds) == ErrorCode.CORRUPT_MESSAGE


def test_a_compressed_batch_over_the_decompression_limit_is_too_large_for_both(
    builds: list[ModuleType],
) -> None:
    records = [Record(i, 0, None, bytes(4096)) for i in range(300)]
    buf = encode_batch(records, compression=CompressionType.GZIP, base_timestamp=0)
    assert _same_verdicts(buf, builds) == ErrorCode.MESSAGE_TOO_LARGE


def _record_with_timestamp_varint(size: int) -> bytes:
    """One record whose timestampDelta varint takes `size` bytes (continuation bits)."""
    timestamp = bytes([0x80] * (size - 1) + [0x00])
    body = bytes([0]) + timestamp + bytes([0, 1, 1, 0])
    return _with_records_section(bytes([len(body) * 2]) + body, 1)


def test_a_ten_byte_timestamp_varint_is_accepted_and_an_eleven_byte_one_refused(
    builds: list[ModuleType],
) -> None:
    assert _same_verdicts(_record_with_timestamp_varint(10), builds) is None
    assert _same_verdicts(_record_with_timestamp_varint(11), builds) == ErrorCode.CORRUPT_MESSAGE


def test_both_builds_are_tested_where_a_compiler_is_present(builds: list[ModuleType]) -> None:
    can_build = build_native.compiler_available() and build_native.mypyc_available()
    assert [native.is_native(b) for b in builds] == ([False, True] if can_build else [False])


def test_a_native_build_of_another_source_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = ModuleType(native.native_name(record_walk))
    setattr(stale, native.DIGEST_NAME, "0" * 64)
    monkeypatch.setitem(sys.modules, native.native_name(record_walk), stale)
    assert native.load_native(record_walk) is record_walk
    assert record_walk.__file__ is not None
    setattr(stale, native.DIGEST_NAME, native.source_digest(Path(record_walk.__file__)))
    assert native.load_native(record_walk) is stale
