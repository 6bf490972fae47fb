"""Child process for test_durability: appends with flush.messages=1 and reports each
acknowledged batch on stdout until the parent kills it with SIGKILL."""

from __future__ import annotations

import sys

import trio

from broker.config import BrokerConfig
from broker.log.log_manager import LogManager
from tests.log.helpers import make_batch


async def main(log_dir: str) -> None:
    manager = LogManager(BrokerConfig({"log.dirs": log_dir, "log.flush.interval.messages": "1"}))
    await manager.open()
    log = (await manager.create_topic("durable", 1)).partitions[0]
    for i in range(100_000):
        data, header = make_batch([b"record-%d" % i])
        result = await log.append(data, header)
        print(result.base_offset, flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
