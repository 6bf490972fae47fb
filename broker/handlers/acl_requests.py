"""Conversions between the ACL APIs' wire fields and the authorizer's value classes.

Unknown codes become the enums' UNKNOWN member, which validation then refuses
with Kafka's messages rather than failing the whole request.
"""

from __future__ import annotations

import enum
from typing import Protocol, TypeVar

from broker.security.acl import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)

E = TypeVar("E", bound=enum.IntEnum)


def to_enum(cls: type[E], code: int) -> E:
    try:
        return cls(code)
    except ValueError:
        return cls(0)  # every ACL enum has UNKNOWN = 0


class WireFilter(Protocol):
    """DescribeAclsRequest and DeleteAclsFilter share these fields."""

    @property
    def resource_type_filter(self) -> int: ...
    @property
    def resource_name_filter(self) -> str | None: ...
    @property
    def pattern_type_filter(self) -> int: ...
    @property
    def principal_filter(self) -> str | None: ...
    @property
    def host_filter(self) -> str | None: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


def binding_filter(wire: WireFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            to_enum(ResourceType, wire.resource_type_filter),
            wire.resource_name_filter,
            to_enum(PatternType, wire.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            wire.principal_filter,
            wire.host_filter,
            to_enum(AclOperation, wire.operation),
            to_enum(AclPermissionType, wire.permission_type),
        ),
    )
