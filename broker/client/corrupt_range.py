"""Which offsets a CORRUPT_MESSAGE Fetch answer covers, found by probing.

The broker answers CORRUPT_MESSAGE for every offset from a corrupt batch up to the
next batch it can read (`LogSegment.find_batch_checked`), but a Fetch answer has no
room to say where that is. The client finds it with Fetches of one batch each:
doubling steps past the bad offset until one reads, then a binary search, so a
range of N offsets costs about 2 log2(N) requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.client.session import ClientError

Readable = Callable[[int], Awaitable[bool]]
"""Whether a Fetch at this offset answers without CORRUPT_MESSAGE."""


class CorruptRangeError(ClientError):
    """Offsets `first` to `next_readable - 1` of a partition cannot be read."""

    def __init__(self, topic: str, partition: int, first: int, next_readable: int) -> None:
        self.topic = topic
        self.partition = partition
        self.first = first
        self.next_readable = next_readable
        super().__init__(self.advice(None))

    def advice(self, group: str | None) -> str:
        """One line: what is lost and how to read on past it."""
        where = f"{self.topic}-{self.partition}"
        skip = f"consume from it with -o {self.next_readable} -p {self.partition}"
        if group is not None:
            skip = (
                f"move group {group} past it with: broker client groups reset-offsets {group} "
                f"--topic {self.topic}:{self.partition} --to-offset {self.next_readable} "
                "--execute"
            )
        return (
            f"offsets {self.first} to {self.next_readable - 1} of {where} cannot be read: "
            f"the broker reports a corrupt batch (CORRUPT_MESSAGE); the next readable offset "
            f"is {self.next_readable}: {skip}"
        )


async def next_readable_offset(readable: Readable, bad: int, log_end: int) -> int:
    """The first offset above `bad` (known unreadable) that reads, at most `log_end`
    (a Fetch there reads nothing, without an error)."""
    low, step = bad, 1
    while True:
        probe = min(bad + step, log_end)
        if probe >= log_end or await readable(probe):
            high = probe
            break
        low, step = probe, step * 2
    while high - low > 1:
        middle = (low + high) // 2
        if await readable(middle):
            high = middle
        else:
            low = middle
    return high
