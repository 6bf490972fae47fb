"""`api-versions`, `metadata`, `topics ...` and `groups ...`: one request each."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import attrs

from broker.client.cleaner_state import describe_line, fetch_cleaner_state
from broker.client.consumer_group_describe import consumer_group_lines, describe_consumer_groups
from broker.client.group_description import (
    OFFSETS_HEADER,
    OFFSETS_MIN_WIDTHS,
    STATE_HEADER,
    describe_partitions,
    table,
)
from broker.client.jsonify import to_json
from broker.client.routing_session import find_coordinator
from broker.client.session import ClientError, ClientSession, check_error, error_name
from broker.client.topics import fetch_metadata
from broker.protocol.api import SUPPORTED_VERSIONS
from broker.protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from broker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from broker.protocol.messages.delete_topics_request import DeleteTopicState
from broker.protocol.messages.registry import API_NAMES

Parsers = Any  # argparse's private _SubParsersAction


def print_json(value: Any) -> None:
    print(json.dumps(to_json(value), indent=2, sort_keys=False))


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    def command(
        parsers: Parsers, name: str, run: Any, help: str, epilog: str, **kwargs: Any
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parsers.add_parser(
            name, parents=[common], help=help, epilog=epilog, **kwargs
        )
        p.set_defaults(run=run)
        return p

    raw = argparse.RawDescriptionHelpFormatter
    command(
        commands,
        "api-versions",
        api_versions,
        "list the APIs and versions the broker supports",
        "example: broker client api-versions -b 127.0.0.1:9092",
        formatter_class=raw,
    )
    p = command(
        commands,
        "metadata",
        metadata,
        "show brokers, cluster id and topics (all, or the named ones)",
        "examples:\n  broker client metadata\n  broker client metadata orders --json",
        formatter_class=raw,
    )
    p.add_argument("topics", nargs="*", metavar="TOPIC")

    topics = commands.add_parser(
        "topics", help="create, delete, list or describe topics"
    ).add_subparsers(dest="action", required=True)
    p = command(
        topics,
        "create",
        topics_create,
        "create topics",
        "example: broker client topics create orders --partitions 3 --config retention.ms=60000",
    )
    p.add_argument("names", nargs="+", metavar="TOPIC")
    p.add_argument("--partitions", type=int, default=1, help="partition count (default 1)")
    p.add_argument(
        "--replication-factor", type=int, default=1, help="replication factor (default 1)"
    )
    p.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="topic config"
    )
    p = command(
        topics,
        "delete",
        topics_delete,
        "delete topics",
        "example: broker client topics delete orders",
    )
    p.add_argument("names", nargs="+", metavar="TOPIC")
    p = command(
        topics,
        "list",
        topics_list,
        "print topic names, one per line (internal `__` topics only with --include-internal)",
        "example: broker client topics list --include-internal",
    )
    p.add_argument(
        "--include-internal",
        action="store_true",
        help="also list internal topics (Metadata is_internal), as kcat -L does",
    )
    p = command(
        topics,
        "describe",
        topics_describe,
        "partitions, leaders and replicas of topics",
        "example: broker client topics describe orders",
    )
    p.add_argument("names", nargs="*", metavar="TOPIC")

    groups = commands.add_parser("groups", help="list or describe consumer groups").add_subparsers(
        dest="action", required=True
    )
    command(
        groups,
        "list",
        groups_list,
        "print group ids with their state and protocol type",
        "example: broker client groups list",
    )
    p = command(
        groups,
        "describe",
        groups_describe,
        "per partition: committed offset, log end, lag and consumer (as kafka-consumer-groups)",
        "examples:\n  broker client groups describe my-group\n"
        "  broker client groups describe my-group --state\n"
        "  broker client groups describe my-group --json",
        formatter_class=raw,
    )
    p.add_argument("names", nargs="+", metavar="GROUP")
    p.add_argument(
        "--state",
        action="store_true",
        help="the group's coordinator, assignment strategy, state and member count",
    )


async def api_versions(session: ClientSession, args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for key, (low, high) in sorted(session.broker_versions.items()):
        ours = SUPPORTED_VERSIONS.get(key)
        usable = min(high, ours[1]) if ours and min(high, ours[1]) >= max(low, ours[0]) else None
        rows.append(
            {
                "api_key": key,
                "name": API_NAMES.get(key, "Unknown"),
                "min_version": low,
                "max_version": high,
                "usable_version": usable,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            shown = "none" if r["usable_version"] is None else r["usable_version"]
            print(
                f"{r['name']}({r['api_key']}): {r['min_version']} to {r['max_version']} "
                f"[usable: {shown}]"
            )
    return 0


async def metadata(session: ClientSession, args: argparse.Namespace) -> int:
    response = await fetch_metadata(session, list(args.topics) or None)
    if args.json:
        print_json(response)
        return 0
    print(f"cluster {response.cluster_id} controller {response.controller_id}")
    for broker in response.brokers:
        print(f"broker {broker.node_id} at {broker.host}:{broker.port}")
    failed = 0
    for topic in response.topics:
        if topic.error_code:
            failed += 1
            print(f'topic "{topic.name}" error {error_name(topic.error_code)}')
            continue
        print(f'topic "{topic.name}" with {len(topic.partitions)} partitions:')
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            print(
                f"  partition {p.partition_index}, leader {p.leader_id}, "
                f"replicas: {','.join(map(str, p.replica_nodes))}, "
                f"isrs: {','.join(map(str, p.isr_nodes))}"
            )
    return 1 if failed else 0


def _parse_configs(pairs: list[str]) -> tuple[CreatableTopicConfig, ...]:
    configs = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClientError(f"bad --config {pair!r}: expected KEY=VALUE")
        configs.append(CreatableTopicConfig(name=key, value=value))
    return tuple(configs)


def _report_topics(args: argparse.Namespace, response: Any, results: Any, verb: str) -> int:
    """Print a create/delete answer; the first failed topic raises ClientError."""
    if args.json:
        print_json(response)
    for result in results:
        check_error(result.error_code, f"{verb} topic {result.name!r}", result.error_message)
        if not args.json:
            print(f"{verb}d topic {result.name}")
    return 0


async def topics_create(session: ClientSession, args: argparse.Namespace) -> int:
    configs = _parse_configs(args.config)
    body = CreateTopicsRequest(
        topics=tuple(
            CreatableTopic(
                name=name,
                num_partitions=args.partitions,
                replication_factor=args.replication_factor,
                configs=configs,
            )
            for name in args.names
        ),
        timeout_ms=30_000,
    )
    response = await session.call(body)
    return _report_topics(args, response, response.topics, "create")


async def topics_delete(session: ClientSession, args: argparse.Namespace) -> int:
    version = session.version_for(20)
    if version >= 6:
        body = DeleteTopicsRequest(
            topics=tuple(DeleteTopicState(name=name) for name in args.names), timeout_ms=30_000
        )
    else:
        body = DeleteTopicsRequest(topic_names=tuple(args.names), timeout_ms=30_000)
    response = await session.request(body, version)
    return _report_topics(args, response, response.responses, "delete")


async def topics_list(session: ClientSession, args: argparse.Namespace) -> int:
    response = await fetch_metadata(session, None)
    names = sorted(
        t.name or ""
        for t in response.topics
        if not t.error_code and (args.include_internal or not t.is_internal)
    )
    if args.json:
        print(json.dumps(names))
    else:
        for name in names:
            print(name)
    return 0


async def topics_describe(session: ClientSession, args: argparse.Namespace) -> int:
    response = await fetch_metadata(session, list(args.names) or None)
    if args.json:
        print_json(response.topics)
    for topic in sorted(response.topics, key=lambda t: t.name or ""):
        check_error(topic.error_code, f"topic {topic.name!r}")
        if args.json:
            continue
        replication = len(topic.partitions[0].replica_nodes) if topic.partitions else 0
        print(
            f"Topic: {topic.name}\tTopicId: {topic.topic_id}\t"
            f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {replication}"
        )
        cleaner = await fetch_cleaner_state(session, topic.name or "")
        for p in sorted(topic.partitions, key=lambda p: p.partition_index):
            state = cleaner.get(p.partition_index)
            print(
                f"\tTopic: {topic.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                f"Replicas: {','.join(map(str, p.replica_nodes))}\t"
                f"Isr: {','.join(map(str, p.isr_nodes))}"
                + (f"\t{describe_line(state)}" if state is not None else "")
            )
    return 0


async def groups_list(session: ClientSession, args: argparse.Namespace) -> int:
    response = await session.call(ListGroupsRequest())
    check_error(response.error_code, "ListGroups failed")
    if args.json:
        print_json(response.groups)
        return 0
    for group in sorted(response.groups, key=lambda g: str(g.group_id)):
        state = group.group_state or "-"
        print(f"{group.group_id}\t{state}\t{group.protocol_type or '-'}\t{group.group_type or '-'}")
    return 0


async def groups_describe(session: ClientSession, args: argparse.Namespace) -> int:
    """Per partition the committed offset, log end and lag, and who consumes it; with
    --state the group's coordinator, assignor, state and member count. The layout is
    kafka-consumer-groups.sh --describe's, one table per group.

    A group the coordinator does not know answers DescribeGroups with state Dead and no
    error; like kafka-consumer-groups.sh we call that an error ("does not exist").
    """
    consumer_groups = await describe_consumer_groups(session, args.names)
    classic = tuple(n for n in args.names if n not in consumer_groups)
    response = await session.call(DescribeGroupsRequest(groups=classic))
    described: list[dict[str, Any]] = []
    for group in [*consumer_groups.values(), *response.groups]:
        check_error(group.error_code, f"group {group.group_id!r}")
        if group.group_state == "Dead":
            raise ClientError(f"group {group.group_id!r} does not exist")
        kind = "consumer" if group.group_id in consumer_groups else "classic"
        if args.state:
            coordinator = await find_coordinator(session, group.group_id)
            if args.json:
                described.append(
                    {
                        **to_json(group),
                        "group_type": kind,
                        "coordinator": attrs.asdict(coordinator),
                    }
                )
                continue
            print()
            if kind == "consumer":
                print("\n".join(consumer_group_lines(group)))
                continue
            row = (
                group.group_id,
                f"{coordinator.host}:{coordinator.port} ({coordinator.node_id})",
                group.protocol_data or "",
                group.group_state,
                str(len(group.members)),
            )
            print("\n".join(table(STATE_HEADER, [row])))
            continue
        rows = await describe_partitions(session, group)
        if args.json:
            described.append(
                {**to_json(group), "group_type": kind, "offsets": [r.to_json() for r in rows]}
            )
            continue
        if group.group_state == "Empty":
            print(f"\nConsumer group '{group.group_id}' has no active members.", file=sys.stderr)
        elif group.group_state in ("PreparingRebalance", "CompletingRebalance", "Reconciling"):
            print(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)
        print()
        print("\n".join(table(OFFSETS_HEADER, [r.cells() for r in rows], OFFSETS_MIN_WIDTHS)))
    if args.json:
        print(json.dumps(described, indent=2, sort_keys=False))
    return 0
