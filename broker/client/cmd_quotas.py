"""`quotas alter|describe`: client quotas, as `kafka-configs.sh --entity-type users|clients|ips`.

Entities are named the way kafka-configs names them: `--entity-type users
--entity-name alice --entity-type clients --entity-default` is the quota of
client ids by default for user alice. `alter` sends AlterClientQuotas with
`--add-config k=v,...` and `--delete-config k,...`; `describe` sends
DescribeClientQuotas for the named entity (or every entity of a type, or all).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from broker.client.session import ClientError, ClientSession, check_error
from broker.protocol.messages import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)
from broker.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from broker.protocol.messages.describe_client_quotas_request import ComponentData

Parsers = Any  # argparse's private _SubParsersAction

ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
Entity = list[tuple[str, str | None]]
"""(protocol entity type, name or None for <default>); a name of "" means not given."""


class _EntityType(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        if values not in ENTITY_TYPES:
            parser.error(f"--entity-type must be one of {', '.join(ENTITY_TYPES)}")
        entity = list(getattr(namespace, "entity", None) or [])
        entity.append((ENTITY_TYPES[values], ""))
        namespace.entity = entity


class _EntityName(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        entity = list(getattr(namespace, "entity", None) or [])
        if not entity or entity[-1][1] != "":
            parser.error(f"{option} must follow an --entity-type")
        name = None if option == "--entity-default" else str(values)
        entity[-1] = (entity[-1][0], name)
        namespace.entity = entity


def add_parser(commands: Parsers, common: argparse.ArgumentParser) -> None:
    quotas = commands.add_parser(
        "quotas", help="alter or describe client quotas (users, clients, ips)"
    ).add_subparsers(dest="action", required=True)
    for name, run, help_text, epilog in (
        (
            "alter",
            quotas_alter,
            "set (--add-config) or remove (--delete-config) quotas of an entity",
            "examples:\n"
            "  broker client quotas alter --entity-type users --entity-name alice"
            " --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152\n"
            "  broker client quotas alter --entity-type clients --entity-default"
            " --add-config request_percentage=50\n"
            "  broker client quotas alter --entity-type ips --entity-name 10.0.0.7"
            " --add-config connection_creation_rate=10\n"
            "  broker client quotas alter --entity-type users --entity-name alice"
            " --delete-config producer_byte_rate",
        ),
        (
            "describe",
            quotas_describe,
            "show the quotas of an entity, of every entity of a type, or all",
            "examples:\n"
            "  broker client quotas describe\n"
            "  broker client quotas describe --entity-type users --entity-name alice\n"
            "  broker client quotas describe --entity-type clients --json",
        ),
    ):
        p: argparse.ArgumentParser = quotas.add_parser(
            name,
            parents=[common],
            help=help_text,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(run=run, entity=[])
        p.add_argument(
            "--entity-type", action=_EntityType, metavar="users|clients|ips", help="entity type"
        )
        p.add_argument("--entity-name", action=_EntityName, metavar="NAME", help="entity name")
        p.add_argument(
            "--entity-default",
            action=_EntityName,
            nargs=0,
            help="the default entity of the preceding --entity-type",
        )
        if name == "alter":
            p.add_argument(
                "--add-config",
                action="append",
                default=[],
                metavar="K=V[,K=V]",
                help="quotas to set",
            )
            p.add_argument(
                "--delete-config",
                action="append",
                default=[],
                metavar="K[,K]",
                help="quotas to remove",
            )
            p.add_argument(
                "--validate-only",
                action="store_true",
                help="let the broker check the change, change nothing",
            )


def parse_add_config(values: Sequence[str]) -> list[tuple[str, float]]:
    pairs = []
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, sep, number = item.partition("=")
            try:
                pairs.append((key.strip(), float(number)))
            except ValueError:
                sep = ""
            if not sep or not key.strip():
                raise ClientError(f"bad --add-config {item!r}: expected KEY=NUMBER")
    return pairs


def parse_delete_config(values: Sequence[str]) -> list[str]:
    return [k.strip() for value in values for k in value.split(",") if k.strip()]


def quota_number(value: float) -> int | float:
    """Quotas travel as doubles; a whole number is shown whole (1048576, not 1.04858e+06)
    and a fraction in full (0.125), in text and JSON alike."""
    return int(value) if value.is_integer() else value


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


async def alter_client_quotas(
    session: ClientSession,
    entity: Entity,
    add: Sequence[tuple[str, float]] = (),
    delete: Sequence[str] = (),
    *,
    validate_only: bool = False,
) -> None:
    """AlterClientQuotas for one entity; raises ClientError on its error code."""
    if not entity or any(name == "" for _, name in entity):
        raise ClientError("name the entity: --entity-type with --entity-name or --entity-default")
    ops = tuple(OpData(key=k, value=v) for k, v in add) + tuple(
        OpData(key=k, remove=True) for k in delete
    )
    if not ops:
        raise ClientError("nothing to alter: give --add-config or --delete-config")
    body = AlterClientQuotasRequest(
        entries=(EntryData(entity=tuple(EntityData(t, n) for t, n in entity), ops=ops),),
        validate_only=validate_only,
    )
    response = await session.call(body)
    for result in response.entries:
        check_error(
            result.error_code, f"altering quotas of {entity_text(entity)}", result.error_message
        )


async def describe_client_quotas(
    session: ClientSession, entity: Entity
) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    """Quotas of the entity (a type without a name: every named entity of it; nothing:
    every entity), as (entity, values) pairs."""
    components = tuple(
        ComponentData(t, MATCH_SPECIFIED, None)
        if name == ""
        else ComponentData(t, MATCH_DEFAULT, None)
        if name is None
        else ComponentData(t, MATCH_EXACT, name)
        for t, name in entity
    )
    response = await session.call(
        DescribeClientQuotasRequest(components=components, strict=bool(components))
    )
    check_error(response.error_code, "describing client quotas", response.error_message)
    return [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            {v.key: v.value for v in entry.values},
        )
        for entry in response.entries or ()
    ]


async def quotas_alter(session: ClientSession, args: argparse.Namespace) -> int:
    await alter_client_quotas(
        session,
        args.entity,
        parse_add_config(args.add_config),
        parse_delete_config(args.delete_config),
        validate_only=args.validate_only,
    )
    verb = "validated" if args.validate_only else "altered"
    print(f"{verb} quotas of {entity_text(args.entity)}")
    return 0


async def quotas_describe(session: ClientSession, args: argparse.Namespace) -> int:
    found = await describe_client_quotas(session, args.entity)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "entity": {t: n for t, n in entity},
                        "quotas": {k: quota_number(v) for k, v in values.items()},
                    }
                    for entity, values in found
                ],
                indent=2,
            )
        )
        return 0
    for entity, values in found:
        shown = ", ".join(f"{k}={quota_number(v)}" for k, v in sorted(values.items()))
        print(f"Quota configs for {entity_text(entity)} are {shown}")
    return 0
