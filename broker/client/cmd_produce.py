"""`produce TOPIC`: one record per stdin line, like `kcat -P`.

Keys are split off with `-K DELIM`, headers (`-H k=v`) go on every record.
Records are batched per partition (up to `--batch-size` records) into v2
record batches, compressed as asked, at the highest Produce version both
sides support. Keyed records go where Kafka's default partitioner puts
them; unkeyed records stick to one partition for the whole run.

Every record gets a delivery report, as kcat's: a batch the broker refuses for
what is in it (a record too large, a corrupt or invalid record) is split in
halves and sent again until the refused records are alone, so one bad line
costs only itself. Failures are reported on stderr by line number as they
come; the run goes on (unless `--stop-on-error`) and ends with the counts,
exiting 1 when any record failed.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

import attrs

from broker.client.output_format import unescape
from broker.client.partitioner import partition_for_key
from broker.client.session import ClientError, ClientSession, error_name
from broker.client.topics import describe_topic
from broker.protocol.api import ApiKey
from broker.protocol.compression import CompressionType
from broker.protocol.error_codes import ErrorCode
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
  printf 'k1:\\n' | broker client produce compacted -K : -Z   # a tombstone for k1

a record the broker refuses is reported by its line and the rest are still written:
  % delivery failed for line 1500 (orders-0): MESSAGE_TOO_LARGE
  error: 2999 of 3000 records written to orders, 1 failed (line 1500)
"""

# Errors that are about some records of a batch, not the topic or the connection: the
# batch is split to find them, and the others are written.
_RECORD_ERRORS = frozenset(
    {
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_TIMESTAMP,
    }
)
_LISTED_RANGES = 10


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
        "--stop-on-error",
        action="store_true",
        help="stop reading input at the first failed record (default: report it, go on)",
    )
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


@attrs.frozen
class Line:
    """One input line as a record, with its line number for the delivery report."""

    number: int
    key: bytes | None
    value: bytes | None  # None: a tombstone (-Z)


@attrs.define
class DeliveryReport:
    """Records read, written and failed so far (failed by line number)."""

    topic: str
    read: int = 0
    written: int = 0
    failed: list[int] = attrs.Factory(list)

    def fail(self, lines: Sequence[Line], where: str, reason: str) -> None:
        numbers = [line.number for line in lines]
        self.failed.extend(numbers)
        plural = "s" if len(numbers) > 1 else ""
        print(
            f"% delivery failed for line{plural} {line_ranges(numbers)} ({where}): {reason}",
            file=sys.stderr,
        )

    def summary(self) -> str:
        text = f"{self.written} of {self.read} records written to {self.topic}"
        if self.failed:
            plural = "s" if len(self.failed) > 1 else ""
            text += f", {len(self.failed)} failed (line{plural} {line_ranges(self.failed)})"
        unsent = self.read - self.written - len(self.failed)
        if unsent:
            text += f", {unsent} not sent"
        return text


def line_ranges(numbers: Sequence[int]) -> str:
    """`3, 5, 7-9`: sorted, runs joined, the first few ranges only."""
    ranges: list[list[int]] = []
    for n in sorted(numbers):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:_LISTED_RANGES]]
    more = len(ranges) - _LISTED_RANGES
    return ", ".join(shown) + (f" and {more} more ranges" if more > 0 else "")


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
    sender = _Sender(session, version, args, compression, headers)
    report = sender.report
    pending: dict[int, list[Line]] = {}
    for number, line in enumerate(read_lines(sys.stdin.buffer), 1):
        key, value = split_key(line, delimiter)
        if args.partition is not None:
            partition = args.partition
        elif key is not None:
            partition = info.partitions[partition_for_key(key, len(info.partitions))]
        else:
            partition = sticky
        batch = pending.setdefault(partition, [])
        stored = None if args.null_empty and not value else value
        batch.append(Line(number, key, stored))
        report.read += 1
        if len(batch) >= args.batch_size:
            await sender.send({partition: pending.pop(partition)})
            if report.failed and args.stop_on_error:
                break
    else:
        if pending:
            await sender.send(pending)
    if report.written != report.read:
        raise ClientError(report.summary())
    if args.verbose:
        print(f"produced {report.read} records to {args.topic}", file=sys.stderr)
    return 0


class _Sender:
    """Produce requests for batches of lines, each record's outcome in `report`."""

    def __init__(
        self,
        session: ClientSession,
        version: int,
        args: argparse.Namespace,
        compression: CompressionType,
        headers: tuple[tuple[str, bytes | None], ...],
    ) -> None:
        self._session = session
        self._version = version
        self._args = args
        self._compression = compression
        self._headers = headers
        self.report = DeliveryReport(args.topic)

    async def send(self, batches: dict[int, list[Line]]) -> None:
        """One request for every partition's batch; refused batches split and resent."""
        topic = self._args.topic
        body = ProduceRequest(
            transactional_id=None,
            acks=self._args.acks,
            timeout_ms=30_000,
            topic_data=(
                TopicProduceData(
                    name=topic,
                    partition_data=tuple(
                        PartitionProduceData(index=partition, records=self._encode(lines))
                        for partition, lines in sorted(batches.items())
                    ),
                ),
            ),
        )
        if self._args.acks == 0:
            # No answer comes: the request is complete once written.
            await self._session.send_without_response(body, self._version)
            self.report.written += sum(map(len, batches.values()))
            return
        try:
            response = await self._session.request(body, self._version)
        except ClientError as exc:
            for partition, lines in sorted(batches.items()):
                self.report.fail(lines, f"{topic}-{partition}", str(exc))
            raise ClientError(f"{self.report.summary()}: {exc}") from None
        firsts: dict[int, list[Line]] = {}
        seconds: dict[int, list[Line]] = {}
        for answer in response.responses:
            for p in answer.partition_responses:
                lines = batches[p.index]
                if p.error_code == ErrorCode.NONE:
                    self.report.written += len(lines)
                elif p.error_code in _RECORD_ERRORS and len(lines) > 1:
                    half = len(lines) // 2
                    firsts[p.index], seconds[p.index] = lines[:half], lines[half:]
                else:
                    message = getattr(p, "error_message", None)
                    reason = error_name(p.error_code) + (f" ({message})" if message else "")
                    self.report.fail(lines, f"{topic}-{p.index}", reason)
        if firsts:
            await self.send(firsts)
            await self.send(seconds)

    def _encode(self, lines: list[Line]) -> bytes:
        records = [
            Record(i, 0, line.key, line.value, self._headers) for i, line in enumerate(lines)
        ]
        return encode_batch(records, compression=self._compression)
