"""A leader's append writes the patched header and the request's records, not a copy."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from broker.protocol.record_batch.validator import CLIENT_APPEND
from broker.protocol.records import iter_batches
from tests.log.helpers import config, decode_values, make_batch, open_manager


async def test_short_writes_still_store_each_batch_whole_with_its_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_writev = os.writev

    def short_writev(fd: int, buffers: Sequence[memoryview]) -> int:
        # At most 7 bytes a call, so every boundary (inside the header, between the
        # header and the records, inside the records) is crossed by a short write.
        return real_writev(fd, [bytes(b"".join(bytes(b) for b in buffers)[:7])])

    monkeypatch.setattr(os, "writev", short_writev)
    async with open_manager(config(tmp_path)) as manager:
        log = (await manager.create_topic("t", 1)).partitions[0]
        sent = []
        for i in range(3):
            data, header = make_batch([b"v%d" % i * 20, b"w%d" % i])
            # A view of a larger buffer, as a request's records are.
            framed = memoryview(b"\xff" * 5 + data + b"\xee" * 9)[5 : 5 + len(data)]
            result = await log.append(framed, header, CLIENT_APPEND)
            assert result.base_offset == 2 * i
            sent.append(data)
        read = await log.read(0, 1 << 20)
        batches = list(iter_batches(read.records))
        assert [h.base_offset for h, _ in batches] == [0, 2, 4]
        for (_, view), original in zip(batches, sent, strict=True):
            assert bytes(view[17:]) == original[17:]  # the CRC's part, byte for byte
        assert [v for _, v in decode_values(read.records)] == [
            b"v0" * 20,
            b"w0",
            b"v1" * 20,
            b"w1",
            b"v2" * 20,
            b"w2",
        ]
