"""ACLs for tests: a terse constructor, and Hypothesis strategies over small alphabets so
that patterns and names collide."""

from __future__ import annotations

from hypothesis import strategies as st

from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

PRINCIPALS = ("User:alice", "User:bob", "User:*")
REQUEST_PRINCIPALS = ("User:alice", "User:bob", "User:carol")
HOSTS = ("*", "10.0.0.1", "10.0.0.2")
REQUEST_HOSTS = ("10.0.0.1", "10.0.0.2")
OPERATIONS = tuple(op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN))
RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP)

resource_names = st.text(alphabet="ab", min_size=1, max_size=5)
pattern_names = st.one_of(st.just("*"), st.text(alphabet="ab", min_size=1, max_size=4))

patterns = st.builds(
    ResourcePattern,
    st.sampled_from(RESOURCE_TYPES),
    pattern_names,
    st.sampled_from((PatternType.LITERAL, PatternType.PREFIXED)),
)
entries = st.builds(
    AccessControlEntry,
    st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS),
    st.sampled_from(OPERATIONS),
    st.sampled_from((AclPermissionType.ALLOW, AclPermissionType.DENY)),
)
bindings = st.builds(AclBinding, patterns, entries)
binding_lists = st.lists(bindings, max_size=25)


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, str, AclOperation, ResourceType, str]:
    return (
        draw(st.sampled_from(REQUEST_PRINCIPALS)),
        draw(st.sampled_from(REQUEST_HOSTS)),
        draw(st.sampled_from(OPERATIONS)),
        draw(st.sampled_from(RESOURCE_TYPES)),
        draw(resource_names),
    )


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    pattern_type: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )
