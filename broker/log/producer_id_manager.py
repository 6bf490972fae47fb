"""Producer ids that are never handed out twice, even across restarts.

Like Kafka's controller-side ProducerIdManager, ids are reserved in blocks: the
end of the current block is made durable *before* any id in it is returned, so
after a crash the broker resumes at the persisted block end, skipping at most the
unused rest of one block.
"""

from __future__ import annotations

from pathlib import Path

import trio

from broker.log._files import atomic_write

PRODUCER_ID_FILE = "producer-id-block"
BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, log_dir: Path, block_size: int = BLOCK_SIZE) -> None:
        self.path = log_dir / PRODUCER_ID_FILE
        self.block_size = block_size
        self._next = 0
        self._block_end = 0
        self._lock = trio.Lock()

    def load(self) -> None:
        """Resume after the last reserved block (worker thread). Raises OSError, or
        ValueError when the file is not a number (never silently restart at 0)."""
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            text = "0"
        self._next = self._block_end = int(text)

    async def allocate(self) -> int:
        """The next id; reserves (durably, in a worker thread) a new block first when
        the current one is used up. OSError from persisting propagates and no id
        from the unpersisted block is handed out."""
        async with self._lock:
            if self._next >= self._block_end:
                end = self._next + self.block_size
                await trio.to_thread.run_sync(atomic_write, self.path, f"{end}\n".encode("ascii"))
                self._block_end = end
            producer_id = self._next
            self._next += 1
            return producer_id
