"""A new connection's first bytes, read before the connection gets a task of its own.

A flood of bad frames, one per connection, costs the broker what it pays to set a
connection up and tear it down (a task, a cancel scope, a stream, registration with
the event loop), far more than rejecting the frame itself. Clients send their first
request as soon as they are connected, so by the time a processor takes a new
connection its first frame has usually arrived: the processor reads what the kernel
already holds, without waiting, and a connection whose first frame is invalid (or
that has already hung up) is closed there and then, never registered. Anything else,
including a frame not yet complete, is served as usual from those bytes on.
"""

from __future__ import annotations

import enum
import os

from broker.protocol.framing import FrameDecoder


def read_nowait(fd: int, limit: int) -> tuple[bytes, bool]:
    """What the kernel already holds for a socket (at most `limit` bytes), and whether
    the peer has stopped sending (end of stream, or a reset); never waits.

    The socket must be non-blocking (Trio's are)."""
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        try:
            data = os.read(fd, limit - total)
        except BlockingIOError:
            break
        except OSError:
            return b"".join(chunks), True
        if not data:
            return b"".join(chunks), True
        chunks.append(data)
        total += len(data)
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), False


class FirstBytes(enum.Enum):
    """What a new connection's first read says about it (the frame itself, when whole,
    is still to be decoded)."""

    HUNG_UP = "HUNG_UP"
    """End of stream before a whole frame: close, nothing to answer."""
    FRAME = "FRAME"
    """A whole first frame is buffered (`FrameDecoder.next_size()` validated its size)."""
    SERVE = "SERVE"
    """Nothing or part of a frame so far: serve the connection, reading on."""


def classify(decoder: FrameDecoder, data: bytes, eof: bool) -> FirstBytes:
    """Feed `data` to a fresh decoder and classify; raises `InvalidFrameSize` for a
    size prefix Kafka would close the connection for."""
    if data:
        decoder.feed(data)
    if decoder.next_size() is not None and decoder.missing() == 0:
        return FirstBytes.FRAME
    return FirstBytes.HUNG_UP if eof else FirstBytes.SERVE


__all__ = ["FirstBytes", "classify", "read_nowait"]
