"""A faust-streaming application: a Table counting words per key, kept in memory and
restored from its changelog topic when the application starts again.

Run: python faust_counter.py BOOTSTRAP DATADIR (a worker until SIGTERM).
"""

from __future__ import annotations

import sys

import faust

bootstrap, datadir = sys.argv[1:3]

app = faust.App(
    "wordcount",
    broker=f"kafka://{bootstrap}",
    store="memory://",
    datadir=datadir,
    processing_guarantee="at_least_once",
    topic_partitions=2,
    web_enabled=False,
    broker_commit_every=20,
    broker_commit_interval=0.5,
    table_standby_replicas=0,
)
words = app.topic(
    "words", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
counts = app.Table("counts", default=int, partitions=2)


@app.agent(words)
async def count(stream: faust.StreamT[bytes]) -> None:
    async for word, _ in stream.items():
        counts[word.decode()] += 1


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "worker", "--loglevel", "info", "--without-web"]
    app.main()
