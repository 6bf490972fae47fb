"""Every (message, version) pair, headers and data types included, round-trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from broker.protocol import api
from tests.protocol.strategies import all_pairs, struct_strategy

PAIRS = all_pairs()


def _join(chunks: list[api.Buffer]) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def test_every_definition_is_covered() -> None:
    names = {cls.__name__ for cls, _ in PAIRS}
    assert {"RequestHeader", "ResponseHeader", "ConsumerProtocolAssignment"} <= names
    assert len(names) == 186
    assert len(PAIRS) == 674


@pytest.mark.parametrize(("cls", "version"), PAIRS, ids=[f"{c.__name__}-v{v}" for c, v in PAIRS])
def test_roundtrip(cls: type, version: int) -> None:
    @settings(max_examples=6, database=None)
    @given(struct_strategy(cls, version))
    def check(obj: Any) -> None:
        data = _join(api.encode_message(obj, version))
        back = api.decode_message(cls, data, version)
        assert back == obj
        assert _join(api.encode_message(back, version)) == data
        # Trailing bytes after a body are tolerated.
        assert api.decode_message(cls, data + b"\x00junk", version) == obj

    check()
