"""The authorizer decides as Kafka's StandardAuthorizer does.

The indexed implementation is checked against a brute-force reference written
straight from the rules (every ACL looked at), over random ACL sets on small
alphabets so that literal, wildcard and prefixed patterns overlap.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import ConfigError
from broker.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
    operations_bit_field,
)
from broker.security.authorizer import (
    ALLOW_ALL,
    StandardAuthorizer,
    create_authorizer,
    parse_super_users,
)
from tests.security.acl_strategies import acl, binding_lists, bindings, queries

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation


def reference_authorize(
    acls: list[AclBinding],
    super_users: frozenset[str],
    allow_everyone: bool,
    query: tuple[str, str, AclOperation, ResourceType, str],
) -> bool:
    principal, host, operation, resource_type, name = query
    if principal in super_users:
        return True
    applicable = [
        b
        for b in acls
        if b.pattern.resource_type == resource_type
        and (
            (b.pattern.pattern_type == LITERAL and b.pattern.name in (name, "*"))
            or (b.pattern.pattern_type == PREFIXED and name.startswith(b.pattern.name))
        )
    ]
    if not applicable:
        return allow_everyone
    matching = [
        b.entry
        for b in applicable
        if b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")
    ]
    if any(e.permission_type == DENY and e.operation in (operation, Op.ALL) for e in matching):
        return False
    implied = {
        Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
        Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
    }.get(operation, set())
    return any(
        e.permission_type == ALLOW
        and (e.operation in (operation, Op.ALL) or e.operation in implied)
        for e in matching
    )


@settings(max_examples=300)
@given(binding_lists, st.lists(queries(), min_size=1, max_size=10), st.booleans())
def test_decisions_equal_a_brute_force_reference(
    acls: list[AclBinding],
    asked: list[tuple[str, str, AclOperation, ResourceType, str]],
    allow_everyone: bool,
) -> None:
    authorizer = StandardAuthorizer(acls, allow_everyone_if_no_acl_found=allow_everyone)
    for query in asked:
        expected = reference_authorize(acls, frozenset(), allow_everyone, query)
        assert authorizer.authorize(*query) == expected, query


@settings(max_examples=200)
@given(binding_lists, bindings, st.lists(queries(), min_size=1, max_size=10))
def test_decisions_follow_removals_like_the_reference(
    acls: list[AclBinding],
    removed_like: AclBinding,
    asked: list[tuple[str, str, AclOperation, ResourceType, str]],
) -> None:
    authorizer = StandardAuthorizer(acls)
    gone = authorizer.remove_acls(
        AclBindingFilter(
            ResourcePatternFilter(
                removed_like.pattern.resource_type, None, removed_like.pattern.pattern_type
            ),
            AccessControlEntryFilter(principal=removed_like.entry.principal),
        )
    )
    remaining = [b for b in acls if b not in gone]
    assert set(authorizer.bindings()) == set(remaining)
    for query in asked:
        assert authorizer.authorize(*query) == reference_authorize(
            remaining, frozenset(), False, query
        )


@settings(max_examples=200)
@given(binding_lists, queries(), st.sampled_from((LITERAL, PREFIXED)), st.booleans())
def test_a_matching_deny_wins_over_any_allows(
    acls: list[AclBinding],
    query: tuple[str, str, AclOperation, ResourceType, str],
    pattern_type: PatternType,
    deny_all: bool,
) -> None:
    principal, host, operation, resource_type, name = query
    allow_everything = [
        acl(name, Op.ALL, ALLOW, principal=principal, host=host, resource_type=resource_type),
        acl("*", Op.ALL, ALLOW, principal="User:*", resource_type=resource_type),
    ]
    deny = acl(
        name if pattern_type == LITERAL else name[:1],
        Op.ALL if deny_all else operation,
        DENY,
        principal=principal,
        host=host,
        pattern_type=pattern_type,
        resource_type=resource_type,
    )
    authorizer = StandardAuthorizer([*acls, *allow_everything, deny])
    assert not authorizer.authorize(*query)


@given(binding_lists, queries())
def test_a_super_user_is_always_allowed(
    acls: list[AclBinding], query: tuple[str, str, AclOperation, ResourceType, str]
) -> None:
    principal = query[0]
    deny_everything = acl("*", Op.ALL, DENY, principal="User:*", resource_type=query[3])
    authorizer = StandardAuthorizer([*acls, deny_everything], super_users=[principal])
    assert authorizer.authorize(*query)
    assert not StandardAuthorizer([*acls, deny_everything]).authorize(*query)


def test_read_write_delete_and_alter_imply_describe_but_deny_read_does_not_deny_describe() -> None:
    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        authorizer = StandardAuthorizer([acl("t", operation)])
        assert authorizer.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
        assert not authorizer.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    authorizer = StandardAuthorizer([acl("t", Op.ALTER_CONFIGS)])
    assert authorizer.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not authorizer.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    authorizer = StandardAuthorizer([acl("t", Op.DESCRIBE), acl("t", Op.READ, DENY)])
    assert authorizer.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_prefixed_patterns_cover_names_that_start_with_them_only() -> None:
    authorizer = StandardAuthorizer([acl("orders-", Op.READ, pattern_type=PREFIXED)])
    assert authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "orders-eu")
    assert authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "orders-")
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "orders")
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "my-orders-eu")
    assert not authorizer.authorize("User:alice", "h", Op.READ, GROUP, "orders-eu")


def test_hosts_principals_and_wildcards_must_match() -> None:
    authorizer = StandardAuthorizer(
        [acl("t", Op.READ, host="10.0.0.1"), acl("*", Op.WRITE, principal="User:*")]
    )
    assert authorizer.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not authorizer.authorize("User:alice", "10.0.0.2", Op.READ, TOPIC, "t")
    assert not authorizer.authorize("User:bob", "10.0.0.1", Op.READ, TOPIC, "t")
    assert authorizer.authorize("User:bob", "10.0.0.9", Op.WRITE, TOPIC, "anything")


def test_without_applicable_acls_the_default_decides() -> None:
    acls = [acl("other", Op.READ)]
    strict = StandardAuthorizer(acls)
    lenient = StandardAuthorizer(acls, allow_everyone_if_no_acl_found=True)
    assert not strict.authorize("User:bob", "h", Op.READ, TOPIC, "t")
    assert lenient.authorize("User:bob", "h", Op.READ, TOPIC, "t")
    # An ACL for someone else on the resource means the default no longer applies.
    assert not lenient.authorize("User:bob", "h", Op.READ, TOPIC, "other")


def test_authorize_by_resource_type_finds_an_allow_not_covered_by_a_deny() -> None:
    def allowed(*acls: AclBinding) -> bool:
        return StandardAuthorizer(acls).authorize_by_resource_type(
            "User:alice", "h", Op.WRITE, TOPIC
        )

    assert not allowed()
    assert allowed(acl("t", Op.WRITE))
    assert allowed(acl("t", Op.ALL))
    assert not allowed(acl("t", Op.READ))
    assert not allowed(acl("t", Op.WRITE), acl("t", Op.WRITE, DENY))
    assert not allowed(acl("t", Op.WRITE), acl("*", Op.WRITE, DENY))
    assert not allowed(acl("tx", Op.WRITE), acl("t", Op.WRITE, DENY, pattern_type=PREFIXED))
    assert allowed(acl("t", Op.WRITE), acl("u", Op.WRITE, DENY))
    assert StandardAuthorizer([], allow_everyone_if_no_acl_found=True).authorize_by_resource_type(
        "User:alice", "h", Op.WRITE, TOPIC
    )


def test_authorized_operations_lists_the_allowed_supported_operations() -> None:
    authorizer = StandardAuthorizer([acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS)])
    field = authorizer.authorized_operations("User:alice", "h", TOPIC, "t")
    assert field == operations_bit_field(
        [Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS]
    )
    assert ALLOW_ALL.authorized_operations("User:x", "h", GROUP, "g") == operations_bit_field(
        [Op.READ, Op.DESCRIBE, Op.DELETE]
    )


def test_adding_an_acl_twice_keeps_one_and_removing_by_filter_returns_what_went() -> None:
    binding = acl("t", Op.READ)
    authorizer = StandardAuthorizer([binding, binding])
    authorizer.add_acls([binding])
    assert authorizer.bindings() == [binding]
    assert authorizer.remove_acls(AclBindingFilter()) == [binding]
    assert authorizer.bindings() == []
    assert not authorizer.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_match_filters_find_the_patterns_that_apply_to_a_name() -> None:
    acls = [
        acl("orders-eu", Op.READ),
        acl("*", Op.READ),
        acl("orders-", Op.READ, pattern_type=PREFIXED),
        acl("ord", Op.READ, pattern_type=PREFIXED),
        acl("other", Op.READ),
        acl("orders-eu", Op.READ, resource_type=GROUP),
    ]
    found = StandardAuthorizer(acls).describe(
        AclBindingFilter(ResourcePatternFilter(TOPIC, "orders-eu", PatternType.MATCH))
    )
    assert set(found) == set(acls[:4])


def test_super_users_are_separated_by_semicolons_and_unknown_authorizers_are_refused() -> None:
    assert parse_super_users(" User:a ; User:b;;") == ["User:a", "User:b"]
    assert create_authorizer(None, [], None, False) is ALLOW_ALL
    authorizer = create_authorizer(
        "kafka.security.authorizer.AclAuthorizer", [acl("t", Op.READ)], "User:root", False
    )
    assert authorizer.enabled
    assert authorizer.authorize("User:root", "h", Op.DELETE, CLUSTER, "kafka-cluster")
    try:
        create_authorizer("com.example.Mine", [], None, False)
    except ConfigError as exc:
        assert "authorizer.class.name" in str(exc)
    else:
        raise AssertionError("an unknown authorizer class was accepted")
