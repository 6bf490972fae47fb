"""`groups reset-offsets` and `groups delete`, as kafka-consumer-groups.sh.

reset-offsets works out each partition's new offset and prints the plan; only with
`--execute` does it commit them (OffsetCommit with generation -1, as an admin client
does), and only while the group has no active members: a running consumer would
overwrite them with its next commit, so Kafka refuses, and so do we. Offsets given
(`--to-offset`, `--shift-by`) are clamped into the log's range, as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

import attrs

from broker.client.admin_routing import coordinator_session
from broker.client.fetcher import EARLIEST, LATEST, list_offsets
from broker.client.group_offsets import fetch_committed
from broker.client.session import ClientError, ClientSession, check_error, error_name
from broker.client.subcommands import Parsers, add_command, subcommands_of
from broker.client.topics import describe_topic
from broker.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    OffsetCommitRequest,
)
from broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

INACTIVE_STATES = frozenset({"Empty", "Dead"})

RESET_EXAMPLES = """examples:
  broker client groups reset-offsets billing --topic orders --to-earliest
  broker client groups reset-offsets billing --topic orders:0,1 --shift-by -10 --execute
  broker client groups reset-offsets billing --all-topics --to-datetime 2026-01-31T12:00:00Z
"""


@attrs.frozen
class OffsetReset:
    topic: str
    partition: int
    current: int  # -1: nothing committed
    new: int


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    groups = subcommands_of(commands, "groups")
    p = add_command(
        groups,
        common,
        "reset-offsets",
        reset_offsets,
        "plan (and with --execute, commit) new offsets for an inactive group",
        RESET_EXAMPLES,
    )
    p.add_argument("group", metavar="GROUP")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        dest="topics",
        action="append",
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    to.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="the first offset at or after this time (ISO 8601; no zone: local time)",
    )
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    run.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    p = add_command(
        groups,
        common,
        "delete",
        delete_groups,
        "delete consumer groups and their committed offsets (DeleteGroups)",
        "example: broker client groups delete billing",
    )
    p.add_argument("names", nargs="+", metavar="GROUP")


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    topic, sep, partitions = spec.partition(":")
    if not topic:
        raise ClientError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P,P")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in partitions.split(",") if p.strip()]
    except ValueError:
        raise ClientError(f"bad --topic {spec!r}: partitions are numbers") from None


def parse_datetime_ms(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ClientError(
            f"bad --to-datetime {text!r}: expected ISO 8601, e.g. 2026-01-31T12:00:00Z"
        ) from None
    return int(moment.astimezone(datetime.UTC).timestamp() * 1000)


async def _partitions(
    session: ClientSession, args: argparse.Namespace, committed: dict[tuple[str, int], int]
) -> dict[str, list[int]]:
    if args.all_topics:
        chosen: dict[str, list[int]] = {}
        for topic, partition in sorted(k for k, v in committed.items() if v >= 0):
            chosen.setdefault(topic, []).append(partition)
        return chosen
    chosen = {}
    for spec in args.topics:
        topic, partitions = parse_topic_spec(spec)
        info = await describe_topic(session, topic)
        for p in partitions or ():
            if p not in info.partitions:
                raise ClientError(f"topic {topic!r} has no partition {p}")
        chosen.setdefault(topic, []).extend(partitions or info.partitions)
    return {t: sorted(set(ps)) for t, ps in chosen.items()}


async def plan_reset(
    session: ClientSession, group_session: ClientSession, args: argparse.Namespace
) -> list[OffsetReset]:
    committed = await fetch_committed(group_session, args.group)
    plan: list[OffsetReset] = []
    for topic, partitions in (await _partitions(session, args, committed)).items():
        starts = await list_offsets(session, topic, partitions, EARLIEST)
        ends = await list_offsets(session, topic, partitions, LATEST)
        at_time: dict[int, int] = {}
        if args.to_datetime is not None:
            stamp = parse_datetime_ms(args.to_datetime)
            at_time = await list_offsets(session, topic, partitions, stamp)
        for p in partitions:
            current = committed.get((topic, p), -1)
            if args.to_earliest:
                new = starts[p]
            elif args.to_latest:
                new = ends[p]
            elif args.to_offset is not None:
                new = args.to_offset
            elif args.shift_by is not None:
                if current < 0:
                    raise ClientError(
                        f"cannot shift {topic}-{p}: group {args.group!r} has no committed offset"
                    )
                new = current + args.shift_by
            else:  # no record at or after the time: the log end, as Kafka's tool does
                new = at_time[p] if at_time.get(p, -1) >= 0 else ends[p]
            plan.append(OffsetReset(topic, p, current, min(max(new, starts[p]), ends[p])))
    return plan


async def _check_inactive(group_session: ClientSession, group: str) -> None:
    response = await group_session.call(DescribeGroupsRequest(groups=(group,)))
    for described in response.groups:
        check_error(described.error_code, f"group {group!r}")
        if described.group_state not in INACTIVE_STATES or described.members:
            raise ClientError(
                f"assignments can only be reset if group {group!r} is inactive, but its "
                f"state is {described.group_state} with {len(described.members)} member(s)"
            )


async def commit_offsets(group_session: ClientSession, group: str, plan: list[OffsetReset]) -> None:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for row in plan:
        by_topic.setdefault(row.topic, []).append(
            OffsetCommitRequestPartition(partition_index=row.partition, committed_offset=row.new)
        )
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=tuple(
            OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )
    response = await group_session.call(body, minimum=2)
    for topic in response.topics:
        for p in topic.partitions:
            check_error(
                p.error_code, f"committing {group!r} offset of {topic.name}-{p.partition_index}"
            )


async def reset_offsets(session: ClientSession, args: argparse.Namespace) -> int:
    _, group_session = await coordinator_session(session, args.group)
    await _check_inactive(group_session, args.group)
    plan = await plan_reset(session, group_session, args)
    if args.execute and plan:
        await commit_offsets(group_session, args.group, plan)
    if args.json:
        rows: list[dict[str, Any]] = [
            {
                "topic": r.topic,
                "partition": r.partition,
                "current_offset": None if r.current < 0 else r.current,
                "new_offset": r.new,
            }
            for r in plan
        ]
        print(
            json.dumps({"group": args.group, "executed": args.execute, "offsets": rows}, indent=2)
        )
        return 0
    if not args.execute:
        print("dry run: no offsets committed; add --execute to apply this plan")
    print(f"{'GROUP':<24} {'TOPIC':<24} {'PARTITION':>9} {'CURRENT-OFFSET':>14} {'NEW-OFFSET':>10}")
    for r in plan:
        current = "-" if r.current < 0 else str(r.current)
        print(f"{args.group:<24} {r.topic:<24} {r.partition:>9} {current:>14} {r.new:>10}")
    return 0


async def delete_groups(session: ClientSession, args: argparse.Namespace) -> int:
    """DeleteGroups to each group's coordinator; a failure of one is reported, the rest go on."""
    results: dict[str, str] = {}
    for group in args.names:
        _, group_session = await coordinator_session(session, group)
        response = await group_session.call(DeleteGroupsRequest(groups_names=(group,)))
        for result in response.results:
            results[result.group_id] = error_name(result.error_code)
    failed = {g: e for g, e in results.items() if e != "NONE"}
    if args.json:
        print(json.dumps([{"group_id": g, "error": e} for g, e in results.items()], indent=2))
    else:
        deleted = [g for g in results if g not in failed]
        if deleted:
            names = ", ".join(f"'{g}'" for g in deleted)
            print(f"Deletion of requested consumer groups ({names}) was successful.")
        for group, error in failed.items():
            print(f"Group '{group}' could not be deleted: {error}")
    if failed:
        shown = ", ".join(f"{g} ({e})" for g, e in failed.items())
        raise ClientError(f"{len(failed)} of {len(results)} group(s) not deleted: {shown}")
    return 0
