"""The budget for responses waiting to be written (issue 14, point 1a).

The memory pool counts a request from its size prefix until its response is written,
but a response can be far larger than its request: a Fetch of a few dozen bytes may
answer 50 MB, read from the log into memory (our reads are `pread`s, not Kafka's
zero-copy `sendfile`), and held until a client that never reads lets it go. Fifty
such clients took the broker from 62 MB to 900 MB with a 50 MB pool.

So a handler that reads much asks this budget first: it is granted what is left, up to
what it wants, reads at most that, then keeps what it actually read until the response
is written (`Request.release_memory`). Like Kafka's non-strict pool, a handler always
makes progress: it is granted at least MIN_GRANT (a consumer's default
max.partition.fetch.bytes), and reads at least one batch (KIP-74): the budget may then be
exceeded, by at most the larger of the two per response waiting to be written, so a
consumer is never starved by clients that do not read. The floor is not one batch: when
the first batch is small, clients that pipeline fetches without reading would get a
stream of tiny responses, which fill neither their socket buffers nor stop them, and the
broker would spend its time answering them (measured: 3 s of CPU in 4 s, a bystander's
p99 5x); at 1 MiB their socket buffers fill after a few responses. The budget is separate from the request
pool: slow readers cannot mute producers, and large produce frames cannot starve
consumers. Sans-IO: plain counting, no waiting.
"""

from __future__ import annotations

MIN_GRANT = 1 << 20
"""What a grant gives even from an exhausted budget (when that much is wanted)."""


class ResponseMemory:
    """A counting budget; `limit` None means unbounded (no pool)."""

    __slots__ = ("_limit", "_used", "peak")

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._used = 0
        self.peak = 0

    @property
    def limit(self) -> int | None:
        return self._limit

    @property
    def used(self) -> int:
        return self._used

    @property
    def available(self) -> int:
        """What a grant can still give (0 when exhausted or overdrawn)."""
        if self._limit is None:
            return 2**63 - 1
        return max(self._limit - self._used, 0)

    def grant(self, wanted: int) -> int:
        """Take up to `wanted` bytes now, at least MIN_GRANT (or `wanted`, if less); what
        is granted is held until released or settled. Never waits."""
        if wanted < 0:
            raise ValueError(f"cannot grant a negative size ({wanted})")
        granted = min(wanted, max(self.available, MIN_GRANT))
        self._take(granted)
        return granted

    def settle(self, granted: int, used: int) -> int:
        """Replace a grant by what was actually used (less, or one first batch larger
        than the grant); returns the bytes now held."""
        if granted < 0 or used < 0:
            raise ValueError(f"cannot settle negative sizes ({granted}, {used})")
        if used < granted:
            self.release(granted - used)
        else:
            self._take(used - granted)
        return used

    def release(self, n: int) -> None:
        if n < 0 or n > self._used:
            raise ValueError(f"cannot release {n} bytes of {self._used} held")
        self._used -= n

    def _take(self, n: int) -> None:
        self._used += n
        if self._used > self.peak:
            self.peak = self._used

    def __repr__(self) -> str:
        return f"ResponseMemory(used={self._used}, limit={self._limit})"
