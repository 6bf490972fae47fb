"""`configs describe|alter` (as kafka-configs.sh) and `topics alter` (kafka-topics.sh --alter).

A resource is `--topic T`, `--broker ID` (that node's dynamic configs, sent to its own
process: on a cluster each process applies only its own) or `--broker-defaults` (the
cluster-wide default, Kafka's `--entity-default`). Changes go through
IncrementalAlterConfigs (SET for `--add-config`, DELETE for `--delete-config`), so
keys not named keep their values; `topics alter --partitions N` is CreatePartitions.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from broker.client.admin_routing import broker_session
from broker.client.session import ClientError, ClientSession, check_error
from broker.client.subcommands import Parsers, add_command, subcommands_of
from broker.config.types import ConfigSource, ResourceType
from broker.protocol.messages import (
    CreatePartitionsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from broker.protocol.messages.create_partitions_request import CreatePartitionsTopic
from broker.protocol.messages.describe_configs_request import DescribeConfigsResource
from broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)

SET, DELETE = 0, 1
_DYNAMIC_SOURCES = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG,
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
}

CONFIGS_EXAMPLES = """examples:
  broker client configs describe --topic orders
  broker client configs describe --broker 0 --all --json
  broker client configs alter --topic orders --add-config retention.ms=60000,cleanup.policy=compact
  broker client configs alter --broker-defaults --add-config max.connections=500
  broker client configs alter --topic orders --delete-config retention.ms
"""

TOPICS_ALTER_EXAMPLES = """examples:
  broker client topics alter orders --partitions 6
  broker client topics alter orders --config retention.ms=60000 --delete-config cleanup.policy
"""


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    configs = commands.add_parser(
        "configs", help="describe or alter topic and broker configs (as kafka-configs.sh)"
    ).add_subparsers(dest="action", required=True)
    for name, run, help_text in (
        ("describe", configs_describe, "show a topic's or broker's configs"),
        ("alter", configs_alter, "set (--add-config) or remove (--delete-config) configs"),
    ):
        p = add_command(configs, common, name, run, help_text, CONFIGS_EXAMPLES)
        target = p.add_mutually_exclusive_group(required=True)
        target.add_argument("--topic", metavar="TOPIC", help="a topic's configs")
        target.add_argument("--broker", type=int, metavar="ID", help="broker ID's own configs")
        target.add_argument(
            "--broker-defaults",
            action="store_true",
            help="the cluster-wide broker defaults (kafka-configs --entity-default)",
        )
        if name == "describe":
            p.add_argument(
                "--all",
                action="store_true",
                help="every config with its source, not only the dynamic ones",
            )
        else:
            _add_change_options(p, "--add-config", "K=V[,K=V]")
    p = add_command(
        subcommands_of(commands, "topics"),
        common,
        "alter",
        topics_alter,
        "add partitions (CreatePartitions) or set/delete topic configs",
        TOPICS_ALTER_EXAMPLES,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partitions", type=int, help="grow the topic to N partitions")
    _add_change_options(p, "--config", "K=V")


def _add_change_options(p: argparse.ArgumentParser, set_option: str, metavar: str) -> None:
    p.add_argument(
        set_option,
        dest="set_configs",
        action="append",
        default=[],
        metavar=metavar,
        help="configs to set (a list value in brackets: k=[a,b])",
    )
    p.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K]",
        help="configs to remove (back to their default)",
    )


def split_config_list(text: str) -> list[str]:
    """`a=1,b=[x,y]` -> [`a=1`, `b=[x,y]`]: commas inside brackets stay (kafka-configs)."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def parse_set_configs(values: Sequence[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        for item in split_config_list(value):
            key, sep, config_value = item.partition("=")
            if not sep or not key.strip():
                raise ClientError(f"bad config {item!r}: expected KEY=VALUE")
            if config_value.startswith("[") and config_value.endswith("]"):
                config_value = config_value[1:-1]
            pairs[key.strip()] = config_value
    return pairs


def parse_delete_configs(values: Sequence[str]) -> list[str]:
    return [key for value in values for key in split_config_list(value)]


def _resource(args: argparse.Namespace) -> tuple[int, str]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.broker is not None:
        return ResourceType.BROKER, str(args.broker)
    return ResourceType.BROKER, ""


def resource_text(resource_type: int, name: str) -> str:
    if resource_type == ResourceType.TOPIC:
        return f"topic {name}"
    return f"broker {name}" if name else "the broker defaults"


async def _session_for(session: ClientSession, resource_type: int, name: str) -> ClientSession:
    """A broker's own configs are answered and applied by its own process only."""
    if resource_type == ResourceType.BROKER and name:
        return await broker_session(session, int(name))
    return session


async def describe_configs(
    session: ClientSession, resource_type: int, name: str
) -> list[dict[str, Any]]:
    """Every config of the resource: name, value, source, read_only, sensitive."""
    target = await _session_for(session, resource_type, name)
    body = DescribeConfigsRequest(
        resources=(
            DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            ),
        )
    )
    response = await target.call(body)
    entries: list[dict[str, Any]] = []
    for result in response.results:
        check_error(
            result.error_code,
            f"describing {resource_text(resource_type, name)}",
            result.error_message,
        )
        for config in sorted(result.configs, key=lambda c: c.name):
            try:
                source = ConfigSource(config.config_source).name
            except ValueError:
                source = str(config.config_source)
            entries.append(
                {
                    "name": config.name,
                    "value": None if config.is_sensitive else config.value,
                    "source": source,
                    "read_only": config.read_only,
                    "sensitive": config.is_sensitive,
                }
            )
    return entries


async def alter_configs(
    session: ClientSession,
    resource_type: int,
    name: str,
    set_configs: dict[str, str],
    delete_configs: Sequence[str],
) -> None:
    """IncrementalAlterConfigs: SET and DELETE on one resource; ClientError on failure."""
    if not set_configs and not delete_configs:
        raise ClientError("nothing to alter: give configs to set or --delete-config")
    target = await _session_for(session, resource_type, name)
    ops = tuple(
        AlterableConfig(name=k, config_operation=SET, value=v) for k, v in set_configs.items()
    )
    ops += tuple(
        AlterableConfig(name=k, config_operation=DELETE, value=None) for k in delete_configs
    )
    body = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=ops),
        )
    )
    response = await target.call(body)
    for result in response.responses:
        check_error(
            result.error_code,
            f"altering {resource_text(resource_type, name)}",
            result.error_message,
        )


def _change_report(
    what: str, set_configs: dict[str, str], delete_configs: Sequence[str]
) -> dict[str, Any]:
    return {"resource": what, "set": set_configs, "deleted": list(delete_configs)}


async def configs_describe(session: ClientSession, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args)
    entries = await describe_configs(session, resource_type, name)
    if not args.all:
        dynamic = {s.name for s in _DYNAMIC_SOURCES}
        entries = [e for e in entries if e["source"] in dynamic]
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    kind = "Configs" if args.all else "Dynamic configs"
    print(f"{kind} for {resource_text(resource_type, name)} are:")
    for e in entries:
        value = "<sensitive>" if e["sensitive"] else "null" if e["value"] is None else e["value"]
        print(f"  {e['name']}={value} ({e['source']})")
    return 0


async def configs_alter(session: ClientSession, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args)
    set_configs = parse_set_configs(args.set_configs)
    deleted = parse_delete_configs(args.delete_config)
    await alter_configs(session, resource_type, name, set_configs, deleted)
    what = resource_text(resource_type, name)
    if args.json:
        print(json.dumps(_change_report(what, set_configs, deleted), indent=2))
    else:
        print(f"Completed updating config for {what}.")
    return 0


async def create_partitions(session: ClientSession, topic: str, count: int) -> None:
    body = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=topic, count=count, assignments=None),),
        timeout_ms=30_000,
    )
    response = await session.call(body)
    for result in response.results:
        check_error(
            result.error_code, f"adding partitions to topic {topic!r}", result.error_message
        )


async def topics_alter(session: ClientSession, args: argparse.Namespace) -> int:
    set_configs = parse_set_configs(args.set_configs)
    deleted = parse_delete_configs(args.delete_config)
    if args.partitions is None and not set_configs and not deleted:
        raise ClientError("nothing to alter: give --partitions, --config or --delete-config")
    if args.partitions is not None:
        await create_partitions(session, args.topic, args.partitions)
    if set_configs or deleted:
        await alter_configs(session, ResourceType.TOPIC, args.topic, set_configs, deleted)
    report = _change_report(f"topic {args.topic}", set_configs, deleted)
    report["partitions"] = args.partitions
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if args.partitions is not None:
        print(f"topic {args.topic} now has {args.partitions} partitions")
    if set_configs or deleted:
        print(f"Completed updating config for topic {args.topic}.")
    return 0
