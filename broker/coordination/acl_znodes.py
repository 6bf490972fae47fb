"""Kafka 2.x's ACL znodes, encoded and decoded (ZkData's ResourceZNode and the change
notifications of AclAuthorizer), so `kafka-acls.sh --authorizer-properties
zookeeper.connect=...` and `zookeeper-shell` read them:

- `/kafka-acl/<ResourceType>/<name>` (literal patterns),
  `/kafka-acl-extended/prefixed/<ResourceType>/<name>` (prefixed):
  `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`
- `/kafka-acl-changes/acl_changes_<seq>`: `Topic:orders` (a literal pattern changed);
  `/kafka-acl-extended-changes/acl_changes_<seq>`:
  `{"version":1,"resourceType":"Topic","name":"orders","patternType":"Prefixed"}`.

Enum members are written with Kafka's names (`TransactionalId`, `DescribeConfigs`).
A name's `/` and `%` are escaped (`%2F`, `%25`) so that every name is one path element.
A document another tool wrote badly raises MalformedZnode naming the path.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from typing import Any, TypeVar
from urllib.parse import unquote

from broker.coordination.broker_registration import MalformedZnode
from broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_NAME = "acl_changes_"
STORED_PATTERN_TYPES = {PatternType.LITERAL: ACL_PATH, PatternType.PREFIXED: PREFIXED_ACL_PATH}
STORED_RESOURCE_TYPES = tuple(
    t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
)

E = TypeVar("E", bound=enum.Enum)


def kafka_name(member: enum.Enum) -> str:
    """TRANSACTIONAL_ID -> TransactionalId, as Kafka's enums print themselves."""
    return "".join(word.capitalize() for word in member.name.split("_"))


def from_kafka_name(kind: type[E], path: str, name: object) -> E:
    for member in kind:
        if kafka_name(member) == name:
            return member
    raise MalformedZnode(f"{path}: no {kind.__name__} is called {name!r}")


def escape_name(name: str) -> str:
    return name.replace("%", "%25").replace("/", "%2F")


def resource_path(pattern: ResourcePattern) -> str:
    root = STORED_PATTERN_TYPES[pattern.pattern_type]
    return f"{root}/{kafka_name(pattern.resource_type)}/{escape_name(pattern.name)}"


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{STORED_PATTERN_TYPES[pattern_type]}/{kafka_name(resource_type)}"


def pattern_of(
    pattern_type: PatternType, resource_type: ResourceType, element: str
) -> ResourcePattern:
    return ResourcePattern(resource_type, unquote(element), pattern_type)


def encode_acl_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": kafka_name(e.permission_type),
            "operation": kafka_name(e.operation),
            "host": e.host,
        }
        for e in entries
    ]
    acls.sort(key=lambda acl: tuple(acl.values()))
    return json.dumps({"version": 1, "acls": acls}).encode()


def decode_acl_entries(path: str, data: bytes) -> list[AccessControlEntry]:
    try:
        document: Any = json.loads(data) if data else {"version": 1, "acls": []}
        return [
            AccessControlEntry(
                str(acl["principal"]),
                str(acl["host"]),
                from_kafka_name(AclOperation, path, acl["operation"]),
                from_kafka_name(AclPermissionType, path, acl["permissionType"]),
            )
            for acl in document["acls"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, MalformedZnode):
            raise
        raise MalformedZnode(f"{path}: not an ACL document ({exc!r})") from None


def encode_acl_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The notification's parent and data for a change of `pattern`'s ACLs."""
    if pattern.pattern_type == PatternType.LITERAL:
        return ACL_CHANGES_PATH, f"{kafka_name(pattern.resource_type)}:{pattern.name}".encode()
    document = {
        "version": 1,
        "resourceType": kafka_name(pattern.resource_type),
        "name": pattern.name,
        "patternType": kafka_name(pattern.pattern_type),
    }
    return EXTENDED_ACL_CHANGES_PATH, json.dumps(document).encode()


def decode_acl_change(path: str, data: bytes) -> ResourcePattern:
    try:
        if path.startswith(ACL_CHANGES_PATH + "/"):
            kind, _, name = data.decode().partition(":")
            return ResourcePattern(
                from_kafka_name(ResourceType, path, kind), name, PatternType.LITERAL
            )
        document = json.loads(data)
        return ResourcePattern(
            from_kafka_name(ResourceType, path, document["resourceType"]),
            str(document["name"]),
            from_kafka_name(PatternType, path, document["patternType"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, MalformedZnode):
            raise
        raise MalformedZnode(f"{path}: not an ACL change notification ({exc!r})") from None
