"""The console's security page: SCRAM users, ACLs and client quotas, listed and changed
with the logged-in principal (the broker lets only a principal with the cluster's
DESCRIBE/ALTER, e.g. a super user, see or change them; a refusal is the page's message)."""

from __future__ import annotations

import secrets
from typing import Any

from broker.client.acl_binding import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSION_TYPES,
    RESOURCE_TYPES,
    code_name,
)
from broker.client.cmd_quotas import alter_client_quotas, describe_client_quotas
from broker.client.cmd_users import DEFAULT_ITERATIONS, MECHANISM_TYPES, SALT_BYTES, mechanism_name
from broker.client.sasl_client import scram_credential
from broker.client.session import ClientError, check_error
from broker.console.console_session import ConsoleSession
from broker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
)
from broker.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.messages.create_acls_request import AclCreation
from broker.protocol.messages.delete_acls_request import DeleteAclsFilter

ANY = 1
# The entities Kafka gives quotas to (type names sorted).
QUOTA_ENTITIES = (["user"], ["client-id"], ["client-id", "user"], ["ip"])


async def _section(read: Any) -> dict[str, Any]:
    """One section of the page: its rows, or why this principal may not see them."""
    try:
        return {"rows": await read}
    except ClientError as exc:
        return {"error": str(exc)}


async def users(session: ConsoleSession) -> list[dict[str, Any]]:
    response = await session.call(DescribeUserScramCredentialsRequest(users=None))
    check_error(response.error_code, "DescribeUserScramCredentials", response.error_message)
    return [
        {
            "user": r.user,
            "mechanisms": [mechanism_name(c.mechanism) for c in r.credential_infos],
        }
        for r in sorted(response.results, key=lambda r: r.user)
        if not r.error_code
    ]


async def acls(session: ConsoleSession) -> list[dict[str, Any]]:
    body = DescribeAclsRequest(
        resource_type_filter=ANY,
        resource_name_filter=None,
        pattern_type_filter=ANY,
        principal_filter=None,
        host_filter=None,
        operation=ANY,
        permission_type=ANY,
    )
    response = await session.call(body, minimum=1)
    check_error(response.error_code, "DescribeAcls", response.error_message)
    return [
        {
            "resource_type": code_name(RESOURCE_TYPES, r.resource_type),
            "resource_name": r.resource_name,
            "pattern_type": code_name(PATTERN_TYPES, r.pattern_type),
            "principal": a.principal,
            "host": a.host,
            "operation": code_name(OPERATIONS, a.operation),
            "permission_type": code_name(PERMISSION_TYPES, a.permission_type),
        }
        for r in response.resources
        for a in r.acls
    ]


async def quotas(session: ConsoleSession) -> list[dict[str, Any]]:
    return [
        {"entity": {t: n for t, n in entity}, "values": values}
        for entity, values in await describe_client_quotas(session, [])
    ]


async def overview(session: ConsoleSession) -> dict[str, Any]:
    return {
        "users": await _section(users(session)),
        "acls": await _section(acls(session)),
        "quotas": await _section(quotas(session)),
    }


async def set_user(session: ConsoleSession, user: str, password: str, mechanism: str) -> None:
    if mechanism not in MECHANISM_TYPES:
        raise ClientError(f"mechanism must be one of {', '.join(MECHANISM_TYPES)}")
    if not user or not password:
        raise ClientError("give a user name and a password")
    credential = scram_credential(
        mechanism, password, DEFAULT_ITERATIONS, secrets.token_bytes(SALT_BYTES)
    )
    upsertion = ScramCredentialUpsertion(
        name=user,
        mechanism=MECHANISM_TYPES[mechanism],
        iterations=DEFAULT_ITERATIONS,
        salt=credential.salt,
        salted_password=credential.salted_password,
    )
    await _alter_users(session, AlterUserScramCredentialsRequest(upsertions=(upsertion,)))


async def delete_user(session: ConsoleSession, user: str, mechanism: str | None) -> list[str]:
    """Delete the user's credential of `mechanism`, or every credential it has (None);
    the mechanisms deleted."""
    if mechanism is not None and mechanism not in MECHANISM_TYPES:
        raise ClientError(f"mechanism must be one of {', '.join(MECHANISM_TYPES)}")
    if mechanism is None:
        listed = {u["user"]: u["mechanisms"] for u in await users(session)}
        mechanisms: list[str] = listed.get(user, [])
        if not mechanisms:
            raise ClientError(f"user {user!r} has no SCRAM credentials")
    else:
        mechanisms = [mechanism]
    deletions = tuple(
        ScramCredentialDeletion(name=user, mechanism=MECHANISM_TYPES[m]) for m in mechanisms
    )
    await _alter_users(session, AlterUserScramCredentialsRequest(deletions=deletions))
    return mechanisms


async def _alter_users(session: ConsoleSession, body: AlterUserScramCredentialsRequest) -> None:
    response = await session.call(body)
    for result in response.results:
        check_error(result.error_code, f"user {result.user!r}", result.error_message)


def _code(table: dict[str, int], what: str, value: object) -> int:
    name = str(value or "").upper().replace("-", "_")
    if name in ("", "ANY", "UNKNOWN", "MATCH") or name not in table:
        choices = ", ".join(k for k in table if k not in ("ANY", "UNKNOWN", "MATCH"))
        raise ClientError(f"{what} must be one of {choices}")
    return table[name]


def _binding(body: dict[str, Any]) -> dict[str, Any]:
    principal = str(body.get("principal", ""))
    if ":" not in principal:
        raise ClientError("the principal is TYPE:NAME, e.g. User:alice")
    return {
        "resource_type": _code(RESOURCE_TYPES, "resource_type", body.get("resource_type")),
        "resource_name": str(body.get("resource_name", "")) or "*",
        "pattern_type": _code(PATTERN_TYPES, "pattern_type", body.get("pattern_type", "LITERAL")),
        "principal": principal,
        "host": str(body.get("host", "*")) or "*",
        "operation": _code(OPERATIONS, "operation", body.get("operation")),
        "permission_type": _code(
            PERMISSION_TYPES, "permission_type", body.get("permission_type", "ALLOW")
        ),
    }


async def add_acl(session: ConsoleSession, body: dict[str, Any]) -> None:
    b = _binding(body)
    creation = AclCreation(
        resource_type=b["resource_type"],
        resource_name=b["resource_name"],
        resource_pattern_type=b["pattern_type"],
        principal=b["principal"],
        host=b["host"],
        operation=b["operation"],
        permission_type=b["permission_type"],
    )
    response = await session.call(CreateAclsRequest(creations=(creation,)), minimum=1)
    for result in response.results:
        check_error(result.error_code, "add ACL", result.error_message)


async def remove_acl(session: ConsoleSession, body: dict[str, Any]) -> int:
    b = _binding(body)
    wanted = DeleteAclsFilter(
        resource_type_filter=b["resource_type"],
        resource_name_filter=b["resource_name"],
        pattern_type_filter=b["pattern_type"],
        principal_filter=b["principal"],
        host_filter=b["host"],
        operation=b["operation"],
        permission_type=b["permission_type"],
    )
    response = await session.call(DeleteAclsRequest(filters=(wanted,)), minimum=1)
    removed = 0
    for result in response.filter_results:
        check_error(result.error_code, "remove ACL", result.error_message)
        removed += len(result.matching_acls)
    return removed


def quota_entity(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The entity of a quota form: `{"entity": {"user": "alice", "client-id": null}}` (null:
    the default), or one `entity_type` and `entity_name` ("" for the default)."""
    entity = body.get("entity")
    if entity is None:
        name = body.get("entity_name")
        entity = {str(body.get("entity_type", "")): None if name in (None, "") else name}
    if not isinstance(entity, dict) or sorted(entity) not in QUOTA_ENTITIES:
        kinds = ", ".join("+".join(e) for e in QUOTA_ENTITIES)
        raise ClientError(f"a quota's entity is one of {kinds}")
    return [(t, None if entity[t] is None else str(entity[t])) for t in sorted(entity)]


async def set_quota(session: ConsoleSession, body: dict[str, Any]) -> None:
    entity = quota_entity(body)
    key = str(body.get("key", ""))
    value = body.get("value")
    if value in (None, ""):
        await alter_client_quotas(session, entity, (), [key])
        return
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ClientError(f"a quota is a number, not {value!r}") from None
    await alter_client_quotas(session, entity, [(key, number)])
