"""`produce TOPIC`: one record per stdin line, like `kcat -P`.

Keys are split off with `-K DELIM`, headers (`-H k=v`) go on every record.
Records are batched per partition (up to `--batch-size` records) into v2
record batches, compressed as asked, at the highest Produce version both
sides support. Keyed records go where Kafka's default partitioner puts
them; unkeyed records stick to one partition for the whole run.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator
from typing import BinaryIO

from broker.client.output_format import unescape
from broker.client.partitioner import partition_for_key
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.topics import describe_topic
from broker.protocol.api import ApiKey
from broker.protocol.compression import CompressionType
from broker.protocol.messages import ProduceRequest
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from broker.protocol.records import Record, encode_batch

_COMPRESSIONS = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
_ZSTD_MIN_PRODUCE_VERSION = 7

EXAMPLES = """examples:
  printf 'a\\nb\\n' | broker client produce orders
  printf 'k1:v1\\n' | broker client produce orders -K : -H source=cli --compression zstd
  broker client produce orders --partition 2 --acks 1 < lines.txt
  printf 'k1:\n' | broker client produce compacted -K : -Z   # a tombstone for k1
"""


def add_parser(commands: object, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(  # type: ignore[attr-defined]
        "produce",
        parents=[common],
        help="produce one record per stdin line",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic")
    p.add_argument(
        "-K", "--key-delimiter", metavar="DELIM", help="split KEY DELIM VALUE (\\t etc. as kcat)"
    )
    p.add_argument(
        "-H", "--header", action="append", default=[], metavar="KEY=VALUE", help="add a header"
    )
    p.add_argument(
        "--acks", type=int, choices=(-1, 0, 1), default=-1, help="required acks (default -1)"
    )
    p.add_argument("--compression", choices=sorted(_COMPRESSIONS), default="none")
    p.add_argument("-p", "--partition", type=int, help="produce to this partition only")
    p.add_argument("--batch-size", type=int, default=1000, help="records per batch (default 1000)")
    p.add_argument(
        "-Z",
        "--null-empty",
        action="store_true",
        help="send an empty value as null: a tombstone on a compacted topic (kcat -Z)",
    )
    p.set_defaults(run=produce)


def parse_headers(pairs: list[str]) -> tuple[tuple[str, bytes | None], ...]:
    headers: list[tuple[str, bytes | None]] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not key:
            raise ClientError(f"bad header {pair!r}: expected KEY=VALUE")
        headers.append((key, value.encode() if sep else None))
    return tuple(headers)


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def split_key(line: bytes, delimiter: bytes | None) -> tuple[bytes | None, bytes]:
    if delimiter is None:
        return None, line
    key, sep, value = line.partition(delimiter)
    if not sep:
        return None, line
    return key, value


async def produce(session: ClientSession, args: argparse.Namespace) -> int:
    compression = _COMPRESSIONS[args.compression]
    minimum = _ZSTD_MIN_PRODUCE_VERSION if compression == CompressionType.ZSTD else 3
    version = session.version_for(ApiKey.PRODUCE, minimum=minimum)
    info = await describe_topic(session, args.topic, auto_create=True)
    if args.partition is not None and args.partition not in info.partitions:
        raise ClientError(f"topic {args.topic!r} has no partition {args.partition}")
    headers = parse_headers(args.header)
    delimiter = unescape(args.key_delimiter) if args.key_delimiter else None
    sticky = random.choice(info.partitions)
    pending: dict[int, list[Record]] = {}
    produced = 0
    for line in read_lines(sys.stdin.buffer):
        key, value = split_key(line, delimiter)
        if args.partition is not None:
            partition = args.partition
        elif key is not None:
            partition = info.partitions[partition_for_key(key, len(info.partitions))]
        else:
            partition = sticky
        batch = pending.setdefault(partition, [])
        stored = None if args.null_empty and not value else value
        batch.append(Record(len(batch), 0, key, stored, headers))
        produced += 1
        if len(batch) >= args.batch_size:
            await _send(session, version, args, compression, {partition: pending.pop(partition)})
    if pending:
        await _send(session, version, args, compression, pending)
    if args.verbose:
        print(f"produced {produced} records to {args.topic}", file=sys.stderr)
    return 0


async def _send(
    session: ClientSession,
    version: int,
    args: argparse.Namespace,
    compression: CompressionType,
    batches: dict[int, list[Record]],
) -> None:
    body = ProduceRequest(
        transactional_id=None,
        acks=args.acks,
        timeout_ms=30_000,
        topic_data=(
            TopicProduceData(
                name=args.topic,
                partition_data=tuple(
                    PartitionProduceData(
                        index=partition, records=encode_batch(records, compression=compression)
                    )
                    for partition, records in sorted(batches.items())
                ),
            ),
        ),
    )
    if args.acks == 0:
        # No answer comes: the request is complete once written.
        await session.send_without_response(body, version)
        return
    response = await session.request(body, version)
    for topic in response.responses:
        for p in topic.partition_responses:
            check_error(
                p.error_code,
                f"produce to {topic.name}-{p.index}",
                getattr(p, "error_message", None),
            )
