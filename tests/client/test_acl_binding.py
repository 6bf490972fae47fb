"""kafka-acls.sh options to CreateAcls bindings and DescribeAcls/DeleteAcls filters."""

from __future__ import annotations

import attrs
import pytest

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
    filters,
    operation_code,
)

TOPIC, GROUP, CLUSTER = RESOURCE_TYPES["TOPIC"], RESOURCE_TYPES["GROUP"], RESOURCE_TYPES["CLUSTER"]
LITERAL, PREFIXED, ANY = PATTERN_TYPES["LITERAL"], PATTERN_TYPES["PREFIXED"], PATTERN_TYPES["ANY"]
ALLOW, DENY = PERMISSION_TYPES["ALLOW"], PERMISSION_TYPES["DENY"]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("Read", 3),
        ("READ", 3),
        ("describeConfigs", 10),
        ("DescribeConfigs", 10),
        ("describe-configs", 10),
        ("IDEMPOTENT_WRITE", 12),
        ("ClusterAction", 9),
        ("All", 2),
    ],
)
def test_operations_read_in_kafkas_spellings(name: str, code: int) -> None:
    assert operation_code(name) == code


def test_unknown_operation_lists_the_valid_ones() -> None:
    with pytest.raises(AclOptionError, match="one of All, Read, Write"):
        operation_code("Fly")


def test_add_is_every_principal_host_operation_and_resource() -> None:
    bindings = bindings_to_add(
        AclOptions(
            allow_principals=("User:alice", "User:bob"),
            operations=("Read", "Describe"),
            topics=("orders",),
            groups=("billing",),
        )
    )
    assert len(bindings) == 2 * 2 * 2
    assert (
        ResourcePattern(GROUP, "billing", LITERAL),
        AccessControlEntry("User:bob", "*", OPERATIONS["DESCRIBE"], ALLOW),
    ) in bindings


def test_add_defaults_to_all_operations_from_any_host() -> None:
    assert bindings_to_add(
        AclOptions(deny_principals=("User:eve",), deny_hosts=("10.0.0.9",), cluster=True)
    ) == [
        (
            ResourcePattern(CLUSTER, "kafka-cluster", LITERAL),
            AccessControlEntry("User:eve", "10.0.0.9", OPERATIONS["ALL"], DENY),
        )
    ]


def test_add_takes_prefixed_patterns_but_not_match() -> None:
    options = AclOptions(allow_principals=("User:a",), topics=("app.",))
    prefixed = bindings_to_add(attrs.evolve(options, resource_pattern_type="prefixed"))
    assert prefixed[0][0] == ResourcePattern(TOPIC, "app.", PREFIXED)
    with pytest.raises(AclOptionError, match="literal or prefixed"):
        bindings_to_add(attrs.evolve(options, resource_pattern_type="match"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (AclOptions(topics=("t",)), "--allow-principal or --deny-principal"),
        (AclOptions(allow_principals=("alice",), topics=("t",)), "TYPE:NAME"),
        (AclOptions(allow_principals=("User:a",)), "name a resource"),
        (AclOptions(allow_hosts=("h",), deny_principals=("User:a",), topics=("t",)), "needs"),
    ],
)
def test_incomplete_add_options_are_refused(options: AclOptions, message: str) -> None:
    with pytest.raises(AclOptionError, match=message):
        bindings_to_add(options)


def test_list_without_options_matches_every_acl() -> None:
    assert filters(AclOptions(), removing=False) == [
        (
            ResourcePattern(RESOURCE_TYPES["ANY"], None, ANY),
            AccessControlEntry(None, None, OPERATIONS["ANY"], PERMISSION_TYPES["ANY"]),
        )
    ]


def test_list_by_principal_and_topic() -> None:
    assert filters(AclOptions(principals=("User:a",), topics=("t",)), removing=False) == [
        (
            ResourcePattern(TOPIC, "t", LITERAL),
            AccessControlEntry("User:a", None, OPERATIONS["ANY"], PERMISSION_TYPES["ANY"]),
        )
    ]


def test_remove_matches_any_host_unless_named_and_needs_a_resource() -> None:
    removal = filters(
        AclOptions(allow_principals=("User:a",), operations=("Read",), topics=("t",)),
        removing=True,
    )
    assert removal == [
        (ResourcePattern(TOPIC, "t", LITERAL), AccessControlEntry("User:a", None, 3, ALLOW))
    ]
    with pytest.raises(AclOptionError, match="name the resource"):
        filters(AclOptions(allow_principals=("User:a",)), removing=True)
