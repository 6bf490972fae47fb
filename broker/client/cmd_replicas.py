"""`log-dirs`, `elect-leaders` and `reassignments list|alter`: where replicas live, who
leads them, and moving them (as kafka-log-dirs.sh, kafka-leader-election.sh and
kafka-reassign-partitions.sh)."""

from __future__ import annotations

import argparse
import json

from broker.client.cmd_configs import alter_configs
from broker.client.jsonify import to_json
from broker.client.reassignment_throttles import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    THROTTLED_RATES,
    Ongoing,
    proposed_moves,
    reassigning_brokers,
    throttled_replicas,
)
from broker.client.session import ClientError, ClientSession, check_error, error_name
from broker.client.subcommands import Parsers, add_command, subcommands_of
from broker.client.topics import fetch_metadata
from broker.config.types import ResourceType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from broker.protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from broker.protocol.messages.describe_log_dirs_request import DescribableLogDirTopic
from broker.protocol.messages.elect_leaders_request import TopicPartitions
from broker.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsTopics,
)

PREFERRED, UNCLEAN = 0, 1
ELECTION_TIMEOUT_MS = 30_000


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    p = add_command(
        commands,
        common,
        "log-dirs",
        log_dirs,
        "the broker's log dirs and the partitions each holds: size and offset lag",
        "example: broker client log-dirs orders",
    )
    p.add_argument("topics", nargs="*", metavar="TOPIC")
    p = add_command(
        commands,
        common,
        "elect-leaders",
        elect_leaders,
        "move leadership to the preferred replicas (or, --unclean, to any live replica)",
        "examples:\n  broker client elect-leaders orders:0 orders:1\n"
        "  broker client elect-leaders --unclean orders:2\n"
        "  broker client elect-leaders            (every partition, preferred)",
    )
    p.add_argument("partitions", nargs="*", metavar="TOPIC:PARTITION")
    p.add_argument("--unclean", action="store_true", help="UNCLEAN instead of PREFERRED")
    reassignments = subcommands_of(commands, "reassignments")
    p = add_command(
        reassignments,
        common,
        "list",
        reassignments_list,
        "ongoing reassignments: replicas, adding and removing",
        "example: broker client reassignments list",
    )
    p.add_argument("topics", nargs="*", metavar="TOPIC")
    p = add_command(
        reassignments,
        common,
        "alter",
        reassignments_alter,
        "move partitions' replicas (TOPIC:PARTITION=BROKER,BROKER,...) or cancel a move",
        "examples:\n  broker client reassignments alter orders:0=2,3\n"
        "  broker client reassignments alter --cancel orders:0",
    )
    p.add_argument("moves", nargs="*", metavar="TOPIC:PARTITION=BROKERS")
    p.add_argument("--cancel", action="append", default=[], metavar="TOPIC:PARTITION")
    p.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES_PER_S",
        help="throttle the moves as kafka-reassign-partitions --throttle does: the topics' "
        "throttled-replica lists (over these moves and those ongoing) and both replication "
        "rates on every broker involved (lifted by reassignments verify once complete)",
    )
    p = add_command(
        reassignments,
        common,
        "verify",
        reassignments_verify,
        "whether moves are complete; once none is in progress, lift the throttles "
        "(kafka-reassign-partitions --verify)",
        "example: broker client reassignments verify orders:0=2,3 orders:1=3,1\n"
        "exit status 1 while a move is in progress or ended elsewhere than asked",
    )
    p.add_argument("moves", nargs="+", metavar="TOPIC:PARTITION=BROKERS")
    p.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="keep the topics' throttled-replica lists and the brokers' rates",
    )


def _topic_partition(text: str) -> tuple[str, int]:
    topic, colon, partition = text.rpartition(":")
    if not colon or not topic or not partition.isdigit():
        raise ClientError(f"{text!r}: expected TOPIC:PARTITION")
    return topic, int(partition)


async def _partitions_of(
    session: ClientSession, topics: list[str]
) -> list[tuple[str, tuple[int, ...]]]:
    """Each named topic's partitions; ClientError naming a topic that does not exist."""
    response = await fetch_metadata(session, list(topics))
    for topic in response.topics:
        check_error(topic.error_code, f"topic {topic.name!r}")
    return [(t.name or "", tuple(p.partition_index for p in t.partitions)) for t in response.topics]


def _print_json(value: object) -> None:
    print(json.dumps(to_json(value), indent=2))


async def log_dirs(session: ClientSession, args: argparse.Namespace) -> int:
    """DescribeLogDirs to the broker connected to (kafka-log-dirs.sh --describe's content)."""
    wanted = None
    if args.topics:
        wanted = tuple(
            DescribableLogDirTopic(topic=name, partitions=partitions)
            for name, partitions in await _partitions_of(session, args.topics)
        )
    described = await session.call(DescribeLogDirsRequest(topics=wanted))
    check_error(described.error_code, "DescribeLogDirs failed")
    if args.json:
        _print_json(described.results)
        return 0
    for result in described.results:
        check_error(result.error_code, f"log dir {result.log_dir}")
        print(f"{result.log_dir}\ttotal {result.total_bytes}\tusable {result.usable_bytes}")
        for topic in result.topics:
            for p in topic.partitions:
                print(
                    f"\t{topic.name}-{p.partition_index}\tsize {p.partition_size}"
                    f"\toffset lag {p.offset_lag}"
                )
    return 0


async def elect_leaders(session: ClientSession, args: argparse.Namespace) -> int:
    """One line per partition; exit 1 if any failed (ELECTION_NOT_NEEDED is no failure)."""
    by_topic: dict[str, list[int]] = {}
    for text in args.partitions:
        topic, partition = _topic_partition(text)
        by_topic.setdefault(topic, []).append(partition)
    request = ElectLeadersRequest(
        election_type=UNCLEAN if args.unclean else PREFERRED,
        topic_partitions=tuple(
            TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        )
        or None,
        timeout_ms=ELECTION_TIMEOUT_MS,
    )
    response = await session.call(request)
    check_error(response.error_code, "ElectLeaders failed")
    if args.json:
        _print_json(response.replica_election_results)
    failed = 0
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            ok = p.error_code in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
            failed += not ok
            if not args.json:
                outcome = "elected" if p.error_code == ErrorCode.NONE else error_name(p.error_code)
                detail = "" if ok or not p.error_message else f" ({p.error_message})"
                print(f"{topic.topic}-{p.partition_id}\t{outcome}{detail}")
    return 1 if failed else 0


async def reassignments_list(session: ClientSession, args: argparse.Namespace) -> int:
    topics = None
    if args.topics:
        topics = tuple(
            ListPartitionReassignmentsTopics(name=name, partition_indexes=partitions)
            for name, partitions in await _partitions_of(session, args.topics)
        )
    listed = await session.call(ListPartitionReassignmentsRequest(topics=topics))
    check_error(listed.error_code, "ListPartitionReassignments failed")
    if args.json:
        _print_json(listed.topics)
        return 0
    for topic in listed.topics:
        for p in topic.partitions:
            print(
                f"{topic.name}-{p.partition_index}\treplicas {_ids(p.replicas)}"
                f"\tadding {_ids(p.adding_replicas)}\tremoving {_ids(p.removing_replicas)}"
            )
    return 0


def _ids(brokers: tuple[int, ...]) -> str:
    return ",".join(map(str, brokers)) or "-"


def _moves(texts: list[str]) -> dict[tuple[str, int], tuple[int, ...]]:
    moves = {}
    for move in texts:
        where, equals, brokers = move.partition("=")
        if not equals or not all(b.strip().isdigit() for b in brokers.split(",")):
            raise ClientError(f"{move!r}: expected TOPIC:PARTITION=BROKER,BROKER,...")
        moves[_topic_partition(where)] = tuple(int(b) for b in brokers.split(","))
    return moves


async def _ongoing(session: ClientSession) -> dict[tuple[str, int], Ongoing]:
    listed = await session.call(ListPartitionReassignmentsRequest(topics=None))
    check_error(listed.error_code, "ListPartitionReassignments failed")
    return {
        (t.name, p.partition_index): Ongoing(tuple(p.replicas), tuple(p.adding_replicas))
        for t in listed.topics
        for p in t.partitions
    }


async def reassignments_alter(session: ClientSession, args: argparse.Namespace) -> int:
    changes: dict[tuple[str, int], tuple[int, ...] | None] = dict(_moves(args.moves))
    for where in args.cancel:
        changes[_topic_partition(where)] = None
    if not changes:
        raise ClientError("nothing to reassign: give TOPIC:PARTITION=BROKERS or --cancel")
    if args.throttle is not None:
        moves = {where: target for where, target in changes.items() if target is not None}
        await _throttle(session, moves, args.throttle)
    by_topic: dict[str, list[ReassignablePartition]] = {}
    for (topic, partition), replicas in changes.items():
        by_topic.setdefault(topic, []).append(
            ReassignablePartition(partition_index=partition, replicas=replicas)
        )
    response = await session.call(
        AlterPartitionReassignmentsRequest(
            topics=tuple(
                ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            )
        )
    )
    check_error(response.error_code, "AlterPartitionReassignments failed")
    if args.json:
        _print_json(response.responses)
    failed = 0
    for topic in response.responses:
        for p in topic.partitions:
            failed += p.error_code != ErrorCode.NONE
            if not args.json:
                outcome = "accepted" if p.error_code == ErrorCode.NONE else error_name(p.error_code)
                detail = f" ({p.error_message})" if p.error_message else ""
                print(f"{topic.name}-{p.partition_index}\t{outcome}{detail}")
    return 1 if failed else 0


async def _throttle(
    session: ClientSession, moves: dict[tuple[str, int], tuple[int, ...]], rate: int
) -> None:
    """Kafka's ReassignPartitionsCommand: over these moves and those ongoing, the leader
    throttle on the replicas that hold the log (the leader copies from one of them),
    the follower throttle on those being added, and the rate on every broker that
    sends or receives."""
    if rate < 1:
        raise ClientError(f"--throttle {rate}: must be at least 1 byte per second")
    response = await fetch_metadata(session, sorted({topic for topic, _ in moves}))
    current = {
        (t.name or "", p.partition_index): tuple(p.replica_nodes)
        for t in response.topics
        for p in t.partitions
    }
    missing = sorted(set(moves) - set(current))
    if missing:
        raise ClientError(f"no such partitions: {missing}")
    planned = proposed_moves(await _ongoing(session), moves, current)
    for topic, lists in sorted(throttled_replicas(planned).items()):
        await alter_configs(session, ResourceType.TOPIC, topic, lists, ())
    rates = dict.fromkeys(THROTTLED_RATES, str(rate))
    for broker in sorted(reassigning_brokers(planned)):
        await alter_configs(session, ResourceType.BROKER, str(broker), rates, ())


async def reassignments_verify(session: ClientSession, args: argparse.Namespace) -> int:
    """Kafka's --verify: each move is in progress, complete, or ended with other replicas
    (its reassignment gone: cancelled, or replaced); once none is in progress, the
    throttles are lifted: the lists of the topics named and the rates on every live
    broker and every broker named (Kafka's clearAllThrottles)."""
    targets = _moves(args.moves)
    ongoing = await _ongoing(session)
    response = await fetch_metadata(session, sorted({topic for topic, _ in targets}))
    current = {
        (t.name or "", p.partition_index): tuple(p.replica_nodes)
        for t in response.topics
        for p in t.partitions
    }
    in_progress = failed = 0
    for (topic, partition), target in sorted(targets.items()):
        where = f"{topic}-{partition}"
        if (topic, partition) in ongoing:
            in_progress += 1
            print(f"{where}	in progress")
        elif current.get((topic, partition)) == target:
            print(f"{where}	complete")
        else:
            failed += 1
            now = _ids(current.get((topic, partition), ()))
            print(
                f"{where}	no reassignment in progress, but replicas are {now}, not {_ids(target)}"
            )
    if in_progress or args.preserve_throttles:
        return 1 if in_progress or failed else 0
    for topic in sorted({topic for topic, _ in targets}):
        lists = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
        await alter_configs(session, ResourceType.TOPIC, topic, {}, lists)
    brokers = {b.node_id for b in response.brokers} | {b for t in targets.values() for b in t}
    for broker in sorted(brokers):
        await alter_configs(session, ResourceType.BROKER, str(broker), {}, THROTTLED_RATES)
    print(
        f"throttles lifted: topics {', '.join(sorted({t for t, _ in targets}))}; brokers {_ids(tuple(sorted(brokers)))}"
    )
    return 1 if failed else 0
