"""Cross-check against kio (Aiven's independent implementation of the protocol).

For every entity kio knows and that we generate in the same version, random kio
instances are encoded by kio's writer; our decoder must read those bytes and our
encoder must reproduce them exactly. kio is generated from a slightly newer Kafka
snapshot than our JSON, so versions only kio has are out of scope, and the few
pairs whose schemas differ between the snapshots are listed in ``EXCLUDED`` with
the reason; they are left out of the cross-check, and a test asserts that each
of them really differs (so the list cannot hide a codec bug).
"""

from __future__ import annotations

import io
from typing import Any

import kio.schema.index as kio_index
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_entity_schema
from kio.serial import entity_writer
from kio.static.primitive import Records

from broker.protocol import api
from broker.protocol.messages import registry

# kio has no strategy for its phantom Records type; any bytes are valid records here.
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

EXCLUDED: dict[tuple[str, int], str] = {
    ("ReadShareGroupStateSummaryResponse", 0): (
        "schema differs: kio 0.6.5 (newer Kafka) has PartitionResult.LeaderEpoch in v0, "
        "our JSON snapshot does not"
    ),
}

OURS = {cls.__name__: cls for cls in registry.CODECS}


def _cases() -> list[tuple[str, int, Any, type]]:
    cases = []
    for name, versions in kio_index.schema_name_map.items():
        for version, by_type in versions.items():
            for entity_type in by_type:
                kio_cls = load_entity_schema(name, version, entity_type)
                ours = OURS.get(kio_cls.__name__)
                if (
                    ours is not None
                    and version in registry.CODECS[ours][0]
                    and (kio_cls.__name__, version) not in EXCLUDED
                ):
                    cases.append((kio_cls.__name__, version, kio_cls, ours))
    return sorted(cases, key=lambda c: (c[0], c[1]))


CASES = _cases()


def test_crosscheck_covers_most_of_kio() -> None:
    assert len(CASES) >= 540


@pytest.mark.parametrize(
    ("name", "version", "kio_cls", "ours"), CASES, ids=[f"{c[0]}-v{c[1]}" for c in CASES]
)
def test_kio_bytes_roundtrip_through_our_codec(
    name: str, version: int, kio_cls: Any, ours: type
) -> None:
    write = entity_writer(kio_cls)

    @settings(max_examples=3, database=None)
    @given(st.from_type(kio_cls))
    def check(instance: Any) -> None:
        buf = io.BytesIO()
        write(buf, instance)
        wire = buf.getvalue()
        decoded = api.decode_message(ours, wire, version)
        assert b"".join(bytes(c) for c in api.encode_message(decoded, version)) == wire

    check()


def test_excluded_pairs_really_differ_from_our_schema() -> None:
    """ReadShareGroupStateSummaryResponse v0: kio's partition has LeaderEpoch, ours not."""
    import typing

    from broker.protocol.messages.read_share_group_state_summary_response import PartitionResult

    assert list(EXCLUDED) == [("ReadShareGroupStateSummaryResponse", 0)]
    (kio_cls,) = [
        load_entity_schema(name, 0, entity_type)
        for name, versions in kio_index.schema_name_map.items()
        for entity_type in versions.get(0, {})
        if load_entity_schema(name, 0, entity_type).__name__ == "ReadShareGroupStateSummaryResponse"
    ]
    results = typing.get_type_hints(kio_cls)["results"]
    read_result = typing.get_args(results)[0]
    partition = typing.get_args(typing.get_type_hints(read_result)["partitions"])[0]
    assert "leader_epoch" in typing.get_type_hints(partition)
    assert "leader_epoch" not in [field[0] for field in PartitionResult.FIELDS]
