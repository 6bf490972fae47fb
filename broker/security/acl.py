"""ACLs as Kafka models them: resource patterns, access control entries, bindings, filters.

The enums carry Kafka's wire codes (org.apache.kafka.common.acl / .resource), so
a request's int8 fields convert with `ResourceType(code)` and back with `int()`.
Filters follow Kafka's AclBindingFilter: None or ANY matches everything, and
pattern type MATCH matches every pattern that would apply to the filter's name
(the literal name, the wildcard `*`, and every prefix of it).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
"""The one CLUSTER resource's name, as in Kafka."""


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# What each resource type supports (Kafka's AclEntry.supportedOperations); the
# authorized-operations fields of responses are computed over these.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def operations_bit_field(operations: Iterable[int]) -> int:
    """Kafka's Utils.to32BitField: bit N set for operation code N."""
    field = 0
    for op in operations:
        field |= 1 << int(op)
    return field


@attrs.frozen
class ResourcePattern:
    """What an ACL applies to: one name (LITERAL, or `*` for all) or a name prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@attrs.frozen
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@attrs.frozen
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@attrs.frozen
class ResourcePatternFilter:
    """None name matches any name; ANY matches any pattern type; MATCH matches the
    patterns that apply to `name` (only with a name)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type == PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD_RESOURCE)
            return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(
                pattern.name
            )
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def invalid_reason(self) -> str | None:
        """Why Kafka refuses this filter (findIndefiniteField), or None."""
        if self.resource_type == ResourceType.UNKNOWN:
            return "Unknown resource type"
        if self.pattern_type == PatternType.UNKNOWN:
            return "Unknown pattern type"
        return None


@attrs.frozen
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def invalid_reason(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "Unknown operation"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Unknown permission type"
        return None


@attrs.frozen
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def invalid_reason(self) -> str | None:
        return self.pattern.invalid_reason() or self.entry.invalid_reason()


ANY_BINDING = AclBindingFilter()


def binding_invalid_reason(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses a binding (Kafka's AclControlManager.validateNewAcl), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "Invalid resourceType " + pattern.resource_type.name
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + pattern.pattern_type.name
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return "Invalid operation " + entry.operation.name
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return "Invalid permissionType " + entry.permission_type.name
    if not pattern.name:
        return "Resource name should not be empty"
    principal_type, sep, principal_name = entry.principal.partition(":")
    if not sep or not principal_type or not principal_name:
        return f"Could not parse principal from `{entry.principal}` (no colon is present)."
    if not entry.host:
        return "Host should not be empty"
    return None
