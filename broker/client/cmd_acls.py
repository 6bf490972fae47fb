"""`acls add | list | remove`: CreateAcls, DescribeAcls and DeleteAcls, as kafka-acls.sh."""

from __future__ import annotations

import argparse
import json
from typing import Any

from broker.client.acl_binding import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSION_TYPES,
    RESOURCE_TYPES,
    AccessControlEntry,
    AclOptionError,
    AclOptions,
    ResourcePattern,
    bindings_to_add,
    code_name,
    filters,
)
from broker.client.session import ClientError, ClientSession, check_error
from broker.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from broker.protocol.messages.create_acls_request import AclCreation
from broker.protocol.messages.delete_acls_request import DeleteAclsFilter

Parsers = Any  # argparse's private _SubParsersAction


def add_parsers(commands: Parsers, common: argparse.ArgumentParser) -> None:
    acls = commands.add_parser(
        "acls", help="add, list or remove ACLs (as kafka-acls.sh)"
    ).add_subparsers(dest="action", required=True)
    for name, run, help, epilog in (
        (
            "add",
            acls_add,
            "add ALLOW/DENY ACLs: every principal x host x operation x resource",
            "examples:\n"
            "  broker client acls add --allow-principal User:alice --operation Read"
            " --operation Describe --topic orders\n"
            "  broker client acls add --allow-principal User:bob --operation All --topic app."
            " --resource-pattern-type prefixed\n"
            "  broker client acls add --deny-principal User:mallory --deny-host 10.0.0.9"
            " --operation Write --topic orders",
        ),
        (
            "list",
            acls_list,
            "list ACLs (all, or those matching the resource and principal given)",
            "examples:\n  broker client acls list\n"
            "  broker client acls list --topic orders --resource-pattern-type match\n"
            "  broker client acls list --principal User:alice --json",
        ),
        (
            "remove",
            acls_remove,
            "remove the ACLs matching the options (unnamed principal/host/operation: any)",
            "examples:\n"
            "  broker client acls remove --allow-principal User:alice --operation Read"
            " --topic orders\n  broker client acls remove --topic orders",
        ),
    ):
        p: argparse.ArgumentParser = acls.add_parser(
            name,
            parents=[common],
            help=help,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(run=run)
        _add_acl_options(p, listing=name == "list")


def _add_acl_options(p: argparse.ArgumentParser, *, listing: bool) -> None:
    def repeat(flag: str, metavar: str, help: str) -> None:
        p.add_argument(flag, action="append", default=[], metavar=metavar, help=help)

    if listing:
        repeat("--principal", "TYPE:NAME", "only ACLs of this principal (repeatable)")
    repeat("--allow-principal", "TYPE:NAME", "principal allowed, e.g. User:alice (repeatable)")
    repeat("--deny-principal", "TYPE:NAME", "principal denied (repeatable)")
    repeat("--allow-host", "HOST", "host the allow applies to (default *) (repeatable)")
    repeat("--deny-host", "HOST", "host the deny applies to (default *) (repeatable)")
    repeat(
        "--operation",
        "OP",
        "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,"
        " AlterConfigs, IdempotentWrite, All (repeatable; default All, any for list/remove)",
    )
    repeat("--topic", "TOPIC", "topic resource ('*' for all topics) (repeatable)")
    repeat("--group", "GROUP", "consumer group resource (repeatable)")
    repeat("--transactional-id", "ID", "transactional id resource (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument(
        "--resource-pattern-type",
        choices=["literal", "prefixed", "match", "any"],
        type=str.lower,
        help="literal (default), prefixed; list/remove also take match and any",
    )


def _options(args: argparse.Namespace) -> AclOptions:
    return AclOptions(
        allow_principals=tuple(args.allow_principal),
        deny_principals=tuple(args.deny_principal),
        allow_hosts=tuple(args.allow_host),
        deny_hosts=tuple(args.deny_host),
        operations=tuple(args.operation),
        topics=tuple(args.topic),
        groups=tuple(args.group),
        transactional_ids=tuple(args.transactional_id),
        cluster=args.cluster,
        resource_pattern_type=args.resource_pattern_type,
        principals=tuple(getattr(args, "principal", ())),
    )


def _binding_json(resource: ResourcePattern, entry: AccessControlEntry) -> dict[str, Any]:
    return {
        "resource_type": code_name(RESOURCE_TYPES, resource.resource_type),
        "resource_name": resource.name,
        "pattern_type": code_name(PATTERN_TYPES, resource.pattern_type),
        "principal": entry.principal,
        "host": entry.host,
        "operation": code_name(OPERATIONS, entry.operation),
        "permission_type": code_name(PERMISSION_TYPES, entry.permission_type),
    }


def _print_grouped(
    heading: str, bindings: list[tuple[ResourcePattern, AccessControlEntry]]
) -> None:
    by_resource: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for resource, entry in bindings:
        by_resource.setdefault(resource, []).append(entry)
    for resource, entries in by_resource.items():
        print(f"{heading} `{resource.describe()}`:")
        for entry in entries:
            print(f" \t{entry.describe()}")
        print()


async def acls_add(session: ClientSession, args: argparse.Namespace) -> int:
    try:
        bindings = bindings_to_add(_options(args))
    except AclOptionError as exc:
        raise ClientError(str(exc)) from None
    body = CreateAclsRequest(
        creations=tuple(
            AclCreation(
                resource_type=r.resource_type,
                resource_name=r.name or "",
                resource_pattern_type=r.pattern_type,
                principal=e.principal or "",
                host=e.host or "",
                operation=e.operation,
                permission_type=e.permission_type,
            )
            for r, e in bindings
        )
    )
    response = await session.call(body, minimum=1)
    for (resource, entry), result in zip(bindings, response.results, strict=False):
        check_error(
            result.error_code,
            f"add ACL {entry.describe()} on {resource.describe()}",
            result.error_message,
        )
    if len(response.results) != len(bindings):
        raise ClientError(f"CreateAcls answered {len(response.results)} of {len(bindings)} ACLs")
    if args.json:
        print(json.dumps([_binding_json(r, e) for r, e in bindings], indent=2))
    else:
        _print_grouped("Adding ACLs for resource", bindings)
    return 0


async def acls_list(session: ClientSession, args: argparse.Namespace) -> int:
    try:
        wanted = filters(_options(args), removing=False)
    except AclOptionError as exc:
        raise ClientError(str(exc)) from None
    found: list[tuple[ResourcePattern, AccessControlEntry]] = []
    for resource, entry in wanted:
        body = DescribeAclsRequest(
            resource_type_filter=resource.resource_type,
            resource_name_filter=resource.name,
            pattern_type_filter=resource.pattern_type,
            principal_filter=entry.principal,
            host_filter=entry.host,
            operation=entry.operation,
            permission_type=entry.permission_type,
        )
        response = await session.call(body, minimum=1)
        check_error(response.error_code, "DescribeAcls failed", response.error_message)
        for described in response.resources:
            pattern = ResourcePattern(
                described.resource_type, described.resource_name, described.pattern_type
            )
            for acl in described.acls:
                binding = (
                    pattern,
                    AccessControlEntry(acl.principal, acl.host, acl.operation, acl.permission_type),
                )
                if binding not in found:
                    found.append(binding)
    if args.json:
        print(json.dumps([_binding_json(r, e) for r, e in found], indent=2))
    else:
        _print_grouped("Current ACLs for resource", found)
    return 0


async def acls_remove(session: ClientSession, args: argparse.Namespace) -> int:
    try:
        wanted = filters(_options(args), removing=True)
    except AclOptionError as exc:
        raise ClientError(str(exc)) from None
    body = DeleteAclsRequest(
        filters=tuple(
            DeleteAclsFilter(
                resource_type_filter=r.resource_type,
                resource_name_filter=r.name,
                pattern_type_filter=r.pattern_type,
                principal_filter=e.principal,
                host_filter=e.host,
                operation=e.operation,
                permission_type=e.permission_type,
            )
            for r, e in wanted
        )
    )
    response = await session.call(body, minimum=1)
    removed: list[tuple[ResourcePattern, AccessControlEntry]] = []
    for result in response.filter_results:
        check_error(result.error_code, "DeleteAcls failed", result.error_message)
        for match in result.matching_acls:
            check_error(match.error_code, "remove ACL", match.error_message)
            removed.append(
                (
                    ResourcePattern(match.resource_type, match.resource_name, match.pattern_type),
                    AccessControlEntry(
                        match.principal, match.host, match.operation, match.permission_type
                    ),
                )
            )
    if args.json:
        print(json.dumps([_binding_json(r, e) for r, e in removed], indent=2))
    else:
        _print_grouped("Removed ACLs for resource", removed)
    return 0
