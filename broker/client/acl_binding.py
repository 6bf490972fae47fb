"""ACL bindings and filters from kafka-acls.sh's options, sans-IO.

`acls add` turns principals x hosts x operations x resources into CreateAcls
creations; `acls list` and `acls remove` turn the same options into
DescribeAcls / DeleteAcls filters, where anything left out matches any value.
Names are Kafka's (`Read`, `DescribeConfigs`, `TOPIC`, `PREFIXED`), read in any case
with or without underscores, and the codes are those of Kafka's enums.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

# org.apache.kafka.common.resource.ResourceType
RESOURCE_TYPES = {
    "UNKNOWN": 0,
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "DELEGATION_TOKEN": 6,
    "USER": 7,
}
# org.apache.kafka.common.resource.PatternType
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
# org.apache.kafka.common.acl.AclOperation
OPERATIONS = {
    "UNKNOWN": 0,
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
}
# org.apache.kafka.common.acl.AclPermissionType
PERMISSION_TYPES = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


class AclOptionError(ValueError):
    """Options that do not make a valid binding or filter (one line)."""


def code_name(table: dict[str, int], code: int) -> str:
    for name, value in table.items():
        if value == code:
            return name
    return f"UNKNOWN({code})"


def _normalized(name: str) -> str:
    """``DescribeConfigs``, ``describe-configs`` and ``DESCRIBE_CONFIGS`` alike."""
    out = []
    for i, c in enumerate(name.strip()):
        if c in "-_ ":
            out.append("_")
        elif c.isupper() and i and name[i - 1].islower():
            out.append("_" + c)
        else:
            out.append(c.upper())
    return "".join(out)


def operation_code(name: str) -> int:
    key = _normalized(name)
    if key not in OPERATIONS or key in ("UNKNOWN", "ANY"):
        valid = ", ".join(_camel(n) for n in OPERATIONS if n not in ("UNKNOWN", "ANY"))
        raise AclOptionError(f"unknown operation {name!r}: one of {valid}")
    return OPERATIONS[key]


def pattern_type_code(name: str) -> int:
    key = _normalized(name)
    if key not in PATTERN_TYPES or key == "UNKNOWN":
        raise AclOptionError(
            f"unknown resource pattern type {name!r}: literal, prefixed, match or any"
        )
    return PATTERN_TYPES[key]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def check_principal(principal: str) -> str:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclOptionError(f"principal {principal!r} must read TYPE:NAME, e.g. User:alice")
    return principal


@attrs.frozen
class ResourcePattern:
    resource_type: int
    name: str | None
    pattern_type: int

    def describe(self) -> str:
        """As kafka-acls.sh prints it."""
        return (
            f"ResourcePattern(resourceType={code_name(RESOURCE_TYPES, self.resource_type)},"
            f" name={self.name}, patternType={code_name(PATTERN_TYPES, self.pattern_type)})"
        )


@attrs.frozen
class AccessControlEntry:
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def describe(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host},"
            f" operation={code_name(OPERATIONS, self.operation)},"
            f" permissionType={code_name(PERMISSION_TYPES, self.permission_type)})"
        )


@attrs.frozen
class AclOptions:
    """The kafka-acls.sh options `acls add|list|remove` share."""

    allow_principals: Sequence[str] = ()
    deny_principals: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    deny_hosts: Sequence[str] = ()
    operations: Sequence[str] = ()
    topics: Sequence[str] = ()
    groups: Sequence[str] = ()
    transactional_ids: Sequence[str] = ()
    cluster: bool = False
    resource_pattern_type: str | None = None
    principals: Sequence[str] = ()  # list's filter


def resources(options: AclOptions, *, for_filter: bool) -> list[ResourcePattern]:
    """The named resources; a filter with none named matches every resource."""
    pattern = pattern_type_code(options.resource_pattern_type or "literal")
    if not for_filter and pattern not in (PATTERN_TYPES["LITERAL"], PATTERN_TYPES["PREFIXED"]):
        raise AclOptionError("ACLs are added with --resource-pattern-type literal or prefixed")
    named = [
        *(ResourcePattern(RESOURCE_TYPES["TOPIC"], t, pattern) for t in options.topics),
        *(ResourcePattern(RESOURCE_TYPES["GROUP"], g, pattern) for g in options.groups),
        *(
            ResourcePattern(RESOURCE_TYPES["TRANSACTIONAL_ID"], t, pattern)
            for t in options.transactional_ids
        ),
    ]
    if options.cluster:
        named.append(ResourcePattern(RESOURCE_TYPES["CLUSTER"], CLUSTER_NAME, pattern))
    if any(not r.name for r in named):
        raise AclOptionError("a resource name may not be empty")
    if not named and for_filter:
        any_pattern = PATTERN_TYPES["ANY"] if options.resource_pattern_type is None else pattern
        return [ResourcePattern(RESOURCE_TYPES["ANY"], None, any_pattern)]
    if not named:
        raise AclOptionError("name a resource: --topic, --group, --transactional-id or --cluster")
    return named


def _entries(options: AclOptions, *, for_filter: bool) -> list[AccessControlEntry]:
    operations = [operation_code(op) for op in options.operations] or [
        OPERATIONS["ANY"] if for_filter else OPERATIONS["ALL"]
    ]
    entries = []
    for permission, principals, hosts in (
        ("ALLOW", options.allow_principals, options.allow_hosts),
        ("DENY", options.deny_principals, options.deny_hosts),
    ):
        if hosts and not principals:
            raise AclOptionError(
                f"--{permission.lower()}-host needs --{permission.lower()}-principal"
            )
        for principal in principals:
            check_principal(principal)
            host_choices: Sequence[str | None] = hosts or [None if for_filter else WILDCARD]
            for host in host_choices:
                for operation in operations:
                    entries.append(
                        AccessControlEntry(principal, host, operation, PERMISSION_TYPES[permission])
                    )
    return entries


def bindings_to_add(options: AclOptions) -> list[tuple[ResourcePattern, AccessControlEntry]]:
    if options.principals:
        raise AclOptionError(
            "--principal filters list; add with --allow-principal/--deny-principal"
        )
    entries = _entries(options, for_filter=False)
    if not entries:
        raise AclOptionError("give --allow-principal or --deny-principal")
    return [(r, e) for r in resources(options, for_filter=False) for e in entries]


def filters(
    options: AclOptions, *, removing: bool
) -> list[tuple[ResourcePattern, AccessControlEntry]]:
    """DescribeAcls/DeleteAcls filters: unnamed principals, hosts and operations match any."""
    found = resources(options, for_filter=True)
    if removing and found[0].resource_type == RESOURCE_TYPES["ANY"]:
        raise AclOptionError(
            "name the resource whose ACLs to remove: --topic, --group, --transactional-id"
            " or --cluster"
        )
    for principal in options.principals:
        check_principal(principal)
    entries = _entries(options, for_filter=True)
    if not entries:
        operations = [operation_code(op) for op in options.operations] or [OPERATIONS["ANY"]]
        principal_choices: Sequence[str | None] = options.principals or [None]
        entries = [
            AccessControlEntry(principal, None, operation, PERMISSION_TYPES["ANY"])
            for principal in principal_choices
            for operation in operations
        ]
    elif options.principals:
        raise AclOptionError("--principal goes without --allow-principal/--deny-principal")
    return [(r, e) for r in found for e in entries]
