"""`delete-records TOPIC:PARTITION... --before OFFSET`, as kafka-delete-records.sh.

DeleteRecords advances each partition's log start offset; records before it are no
longer readable. It goes to each partition's leader (the others answer
NOT_LEADER_OR_FOLLOWER on a cluster). `--before -1` deletes up to the high watermark.
"""

from __future__ import annotations

import argparse
import json

from broker.client.admin_routing import leader_session
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.subcommands import Parsers, add_command
from broker.protocol.messages import DeleteRecordsRequest
from broker.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)

EXAMPLES = """examples:
  broker client delete-records orders:0 --before 1000
  broker client delete-records orders:0 orders:1 --before -1 --json
"""


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    p = add_command(
        commands,
        common,
        "delete-records",
        delete_records_command,
        "delete the records before an offset (DeleteRecords)",
        EXAMPLES,
    )
    p.add_argument("partitions", nargs="+", metavar="TOPIC:PARTITION")
    p.add_argument(
        "--before",
        type=int,
        required=True,
        metavar="OFFSET",
        help="the new log start offset (-1: the high watermark)",
    )


def parse_partition(spec: str) -> tuple[str, int]:
    topic, sep, partition = spec.rpartition(":")
    if not sep or not topic or not partition.isdigit():
        raise ClientError(f"bad partition {spec!r}: expected TOPIC:PARTITION")
    return topic, int(partition)


async def delete_records(session: ClientSession, topic: str, partition: int, before: int) -> int:
    """The partition's new low watermark; ClientError naming the error code."""
    leader = await leader_session(session, topic, partition)
    body = DeleteRecordsRequest(
        topics=(
            DeleteRecordsTopic(
                name=topic,
                partitions=(DeleteRecordsPartition(partition_index=partition, offset=before),),
            ),
        ),
        timeout_ms=30_000,
    )
    response = await leader.call(body)
    for t in response.topics:
        for p in t.partitions:
            check_error(p.error_code, f"deleting records of {t.name}-{p.partition_index}")
            return int(p.low_watermark)
    raise ClientError(f"deleting records of {topic}-{partition}: no answer for the partition")


async def delete_records_command(session: ClientSession, args: argparse.Namespace) -> int:
    rows = []
    for spec in args.partitions:
        topic, partition = parse_partition(spec)
        low = await delete_records(session, topic, partition, args.before)
        rows.append({"topic": topic, "partition": partition, "low_watermark": low})
        if not args.json:
            print(f"partition {topic}-{partition}: low watermark {low}")
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0
