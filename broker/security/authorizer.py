"""The authorizer: Kafka's StandardAuthorizer decision rules over an in-memory ACL index.

Sans-IO: it holds ACLs and answers questions; the store persists them and the
handlers ask. A decision, as Kafka's StandardAuthorizerData makes it:

- a super user (`super.users`) is always allowed;
- the ACLs that apply to a resource are those on its literal name, on the
  wildcard `*`, and on every PREFIXED pattern its name starts with;
- an ACL matches a request when its principal is the request's or `User:*`, its
  host is the client's address or `*`, and its operation is the one asked,
  ALL, or (ALLOW only) one implying it: READ, WRITE, DELETE and ALTER imply
  DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- any matching DENY refuses, whatever ALLOWs match; else a matching ALLOW allows;
- a resource that no ACL applies to at all (for anyone) is allowed only with
  `allow.everyone.if.no.acl.found`.

Checks run on every request for every topic, so they are indexed: literal
patterns in a dict by (type, name), prefixes in a dict by (type, prefix) plus
the set of prefix lengths in use per type, so that the prefixes of a name are
found with one dict lookup per distinct prefix length instead of a scan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Protocol

from broker.config import AUTHORIZER_CLASS_NAMES, ConfigError
from broker.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    operations_bit_field,
)

_ALL = AclOperation.ALL
_DENY = AclPermissionType.DENY
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
_NOTHING: frozenset[AclOperation] = frozenset()
_TYPE_PROBE_NAME = "hardcode"
"""The literal name Kafka's authorizeByResourceType probes first (super users, defaults)."""

Entries = tuple[AccessControlEntry, ...]


class Authorizer(Protocol):
    """What handlers ask. `enabled` False is Kafka without an authorizer."""

    @property
    def enabled(self) -> bool: ...

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool: ...

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool: ...

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int: ...


class AllowAllAuthorizer:
    """No `authorizer.class.name`: everything is allowed, every supported operation listed."""

    @property
    def enabled(self) -> bool:
        return False

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        return True

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return True

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        return operations_bit_field(SUPPORTED_OPERATIONS.get(resource_type, ()))


ALLOW_ALL = AllowAllAuthorizer()


class StandardAuthorizer:
    """ACLs in memory, indexed for cheap checks; mutations replace the index entries."""

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, Entries] = {}
        self._literal: dict[tuple[ResourceType, str], Entries] = {}
        self._prefixed: dict[tuple[ResourceType, str], Entries] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._prefix_length_counts: dict[ResourceType, Counter[int]] = {}
        self.add_acls(bindings)

    @property
    def enabled(self) -> bool:
        return True

    # -- decisions

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        implied_by = _IMPLIED_BY.get(operation, _NOTHING)
        found = allowed = False
        for entries in self._applicable(resource_type, name):
            found = True
            for entry in entries:
                if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                    continue
                if entry.host != host and entry.host != WILDCARD_HOST:
                    continue
                acl_operation = entry.operation
                if entry.permission_type == _DENY:
                    if acl_operation in (operation, _ALL):
                        return False
                elif acl_operation in (operation, _ALL) or acl_operation in implied_by:
                    allowed = True
        if allowed:
            return True
        return not found and self.allow_everyone_if_no_acl_found

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterator[Entries]:
        literal = self._literal
        entries = literal.get((resource_type, name))
        if entries:
            yield entries
        if name != WILDCARD_RESOURCE:
            entries = literal.get((resource_type, WILDCARD_RESOURCE))
            if entries:
                yield entries
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            prefixed = self._prefixed
            size = len(name)
            for length in lengths:
                if length > size:
                    break
                entries = prefixed.get((resource_type, name[:length]))
                if entries:
                    yield entries

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: is `operation` allowed on some
        resource of this type? An ALLOW counts unless a DENY covers every name it allows."""
        if self.authorize(principal, host, operation, resource_type, _TYPE_PROBE_NAME):
            return True
        denied_literal: set[str] = set()
        denied_prefixes: list[str] = []
        allowed: list[ResourcePattern] = []
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for entry in entries:
                if entry.principal not in (principal, WILDCARD_PRINCIPAL):
                    continue
                if entry.host not in (host, WILDCARD_HOST):
                    continue
                if entry.operation not in (operation, _ALL):
                    continue
                if entry.permission_type == _DENY:
                    if pattern.pattern_type == PatternType.LITERAL:
                        denied_literal.add(pattern.name)
                    else:
                        denied_prefixes.append(pattern.name)
                else:
                    allowed.append(pattern)
        if WILDCARD_RESOURCE in denied_literal:
            return False
        for pattern in allowed:
            if any(pattern.name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if pattern.pattern_type == PatternType.PREFIXED or pattern.name not in denied_literal:
                return True
        return False

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The supported operations allowed on the resource, as Kafka's bit field."""
        return operations_bit_field(
            op
            for op in SUPPORTED_OPERATIONS.get(resource_type, ())
            if self.authorize(principal, host, op, resource_type, name)
        )

    # -- the ACLs themselves

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, entries in self._acls.items() for e in entries]

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if binding_filter.matches(b)]

    def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Add bindings; one already present is left as it is (CreateAcls is idempotent)."""
        for binding in bindings:
            entries = self._acls.get(binding.pattern, ())
            if binding.entry not in entries:
                self._set(binding.pattern, (*entries, binding.entry))

    def replace_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Make the ACLs exactly `bindings` (another process of the cluster changed them)."""
        self._acls.clear()
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lengths.clear()
        self._prefix_length_counts.clear()
        self.add_acls(bindings)

    def remove_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove and return every binding the filter matches."""
        removed = self.describe(binding_filter)
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in removed:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, gone in by_pattern.items():
            self._set(pattern, tuple(e for e in self._acls[pattern] if e not in gone))
        return removed

    def _set(self, pattern: ResourcePattern, entries: Entries) -> None:
        key = (pattern.resource_type, pattern.name)
        prefixed = pattern.pattern_type == PatternType.PREFIXED
        index = self._prefixed if prefixed else self._literal
        existed = key in index
        if entries:
            self._acls[pattern] = entries
            index[key] = entries
        else:
            self._acls.pop(pattern, None)
            index.pop(key, None)
        if prefixed and existed != bool(entries):
            counts = self._prefix_length_counts.setdefault(pattern.resource_type, Counter())
            counts[len(pattern.name)] += 1 if entries else -1
            self._prefix_lengths[pattern.resource_type] = tuple(
                sorted(length for length, count in counts.items() if count > 0)
            )


def parse_super_users(value: str | None) -> list[str]:
    """`super.users`: principals separated by semicolons (Kafka's format)."""
    return [p.strip() for p in (value or "").split(";") if p.strip()]


def create_authorizer(
    class_name: str | None,
    bindings: Iterable[AclBinding],
    super_users: str | None,
    allow_everyone_if_no_acl_found: bool,
) -> Authorizer:
    """The authorizer `authorizer.class.name` asks for: none (allow all) or the standard one."""
    if not class_name:
        return ALLOW_ALL
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            f"authorizer.class.name: unsupported authorizer {class_name!r}; "
            f"use one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        )
    return StandardAuthorizer(
        bindings,
        super_users=parse_super_users(super_users),
        allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found,
    )
