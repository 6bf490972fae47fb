"""`broker client consume` finds the offsets a CORRUPT_MESSAGE answer covers by probing."""

from __future__ import annotations

import trio
from hypothesis import given
from hypothesis import strategies as st

from broker.client.corrupt_range import CorruptRangeError, next_readable_offset


@given(
    bad=st.integers(0, 10_000),
    lost=st.integers(1, 10_000),
    after=st.integers(0, 10_000),
)
def test_probing_finds_the_first_readable_offset_in_few_fetches(
    bad: int, lost: int, after: int
) -> None:
    next_readable = bad + lost
    log_end = next_readable + after
    probes: list[int] = []

    async def readable(offset: int) -> bool:
        probes.append(offset)
        return not bad <= offset < next_readable

    found = trio.run(next_readable_offset, readable, bad, log_end)
    assert found == next_readable
    assert all(bad < p <= log_end for p in probes)
    assert len(probes) <= 2 * lost.bit_length() + 2


def test_the_advice_names_the_range_and_the_way_past_it() -> None:
    error = CorruptRangeError("ledger", 0, 30, 31)
    assert "offsets 30 to 30 of ledger-0 cannot be read" in str(error)
    assert "-o 31 -p 0" in str(error)
    assert "groups reset-offsets billing --topic ledger:0 --to-offset 31 --execute" in (
        error.advice("billing")
    )
