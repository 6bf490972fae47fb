"""`consume TOPIC`: print records like `kcat -C`, optionally as a group member."""

from __future__ import annotations

import argparse
import sys

import trio

from broker.client.corrupt_range import CorruptRangeError
from broker.client.fetcher import EARLIEST, LATEST, Cursor, Fetcher, list_offsets
from broker.client.group_member import GroupMember, RebalanceNeeded
from broker.client.output_format import compile_format, render, render_json
from broker.client.session import ClientError, ClientSession
from broker.client.topics import TopicInfo, describe_topic

_MAX_WAIT_MS = 500

EXAMPLES = """examples:
  broker client consume orders --from-beginning -e
  broker client consume orders -o 10 -p 0 --max-messages 5 -f '%p:%o %k=%s\\n'
  broker client consume orders --group billing --from-beginning --json -e

format tokens (-f, as kcat's): %t topic, %p partition, %o offset, %k key,
%s value (NULL for a tombstone, as kcat -Z), %T timestamp, %h headers (k=v,...),
%K/%S key/value length, %%; escapes \\n \\t \\r \\\\.
"""


def add_parser(commands: object, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(  # type: ignore[attr-defined]
        "consume",
        parents=[common],
        help="print records of a topic",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    p.add_argument(
        "-o",
        "--offset",
        help="start offset: beginning, end, N (absolute) or -N (N before the end)",
    )
    p.add_argument("-p", "--partition", type=int, help="read only this partition")
    p.add_argument("-g", "--group", help="consume as a member of this consumer group")
    p.add_argument("-c", "--max-messages", type=int, help="exit after N records")
    p.add_argument(
        "-e", "--exit", action="store_true", help="exit when the end of every partition is reached"
    )
    p.add_argument(
        "--idle-timeout", type=float, metavar="SECONDS", help="exit after SECONDS without records"
    )
    p.add_argument("-f", "--format", help="kcat-style output format (default '%%s\\n')")
    p.add_argument("-K", "--key-delimiter", metavar="DELIM", help="print KEY DELIM VALUE")
    p.set_defaults(run=consume)


def _start_spec(args: argparse.Namespace) -> str:
    if args.offset is not None:
        return str(args.offset)
    return "beginning" if args.from_beginning else "end"


async def start_cursors(
    session: ClientSession, info: TopicInfo, partitions: list[int], spec: str
) -> list[Cursor]:
    if not partitions:
        return []
    if spec == "beginning":
        offsets = await list_offsets(session, info.name, partitions, EARLIEST)
    elif spec in ("end", "latest"):
        offsets = await list_offsets(session, info.name, partitions, LATEST)
    else:
        try:
            value = int(spec)
        except ValueError:
            raise ClientError(f"bad --offset {spec!r}: expected beginning, end, N or -N") from None
        if value >= 0:
            offsets = dict.fromkeys(partitions, value)
        else:
            starts = await list_offsets(session, info.name, partitions, EARLIEST)
            ends = await list_offsets(session, info.name, partitions, LATEST)
            offsets = {p: max(starts[p], ends[p] + value) for p in partitions}
    return [Cursor(p, offsets[p]) for p in partitions]


async def consume(session: ClientSession, args: argparse.Namespace) -> int:
    info = await describe_topic(session, args.topic)
    if args.partition is not None and args.partition not in info.partitions:
        raise ClientError(f"topic {args.topic!r} has no partition {args.partition}")
    fmt = args.format
    if fmt is None:
        fmt = "%k" + args.key_delimiter + "%s\\n" if args.key_delimiter else "%s\\n"
    parts = compile_format(fmt)
    out = sys.stdout.buffer
    fetcher = Fetcher(session, info)
    member = GroupMember(session, args.group, info) if args.group else None
    printed = 0
    last_record_at = trio.current_time()

    def finished() -> bool:
        return args.max_messages is not None and printed >= args.max_messages

    try:
        while not finished():
            if member is not None:
                partitions = await member.join()
                if args.partition is not None:
                    partitions = [p for p in partitions if p == args.partition]
                committed = await member.committed()
                reset = await start_cursors(session, info, partitions, _start_spec(args))
                cursors = [
                    Cursor(c.partition, committed[c.partition])
                    if committed.get(c.partition, -1) >= 0
                    else c
                    for c in reset
                ]
            else:
                partitions = (
                    [args.partition] if args.partition is not None else list(info.partitions)
                )
                cursors = await start_cursors(session, info, partitions, _start_spec(args))
            try:
                while not finished():
                    if args.exit and all(c.at_end for c in cursors):
                        return 0
                    if args.idle_timeout is not None and (
                        trio.current_time() - last_record_at >= args.idle_timeout
                    ):
                        return 0
                    if not cursors:
                        await trio.sleep(_MAX_WAIT_MS / 1000)
                        records = []
                    else:
                        try:
                            records = await fetcher.fetch(cursors, _MAX_WAIT_MS)
                        except CorruptRangeError as exc:
                            raise ClientError(exc.advice(args.group)) from None
                    positions: dict[int, int] = {}
                    for partition, record in records:
                        if args.json:
                            out.write(render_json(info.name, partition, record))
                        else:
                            out.write(render(parts, info.name, partition, record))
                        positions[partition] = record.offset + 1
                        printed += 1
                        if finished():
                            break
                    if records:
                        out.flush()
                        last_record_at = trio.current_time()
                    if member is not None:
                        await member.commit(positions)
                        await member.heartbeat_if_due()
            except RebalanceNeeded:
                continue
    finally:
        if member is not None:
            with trio.move_on_after(5, shield=True):
                await member.leave()
    return 0
