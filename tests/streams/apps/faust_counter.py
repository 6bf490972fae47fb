"""A faust-streaming application: a Table counting words per key, kept in memory and
restored from its changelog topic when the application starts again. Each record it
counts is printed (`PROCESSED partition offset word`; faust logs stdout), so a test can
tell a record faust delivered twice (at least once) from a count the table lost.

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
    async for event in stream.events():
        word, message = event.key.decode(), event.message
        counts[word] += 1
        print(f"PROCESSED {message.partition} {message.offset} {word}", flush=True)


if __name__ == "__main__":
    sys.argv = [sys.argv[0], "worker", "--loglevel", "info", "--without-web"]
    app.main()
