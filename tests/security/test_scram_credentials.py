"""SCRAM credential storage and the Describe/AlterUserScramCredentials rules."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import scramp

from broker.handlers.scram_credentials_apis import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from broker.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.messages.describe_user_scram_credentials_request import UserName
from broker.security.sasl_server import ScramSaslServer
from broker.security.scram_credentials import (
    CREDENTIALS_FILE,
    MECHANISM_BY_NAME,
    ScramCredential,
    ScramCredentialStore,
)

SALT = b"salt-of-twenty-bytes"


class FakeRequest:
    def __init__(self, body: Any) -> None:
        self.body = body
        self.api_version = 0


def upsertion(name: str, password: str = "pw", mechanism: int = 1, iterations: int = 4096) -> Any:
    hash_name = "sha256" if mechanism == 1 else "sha512"
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), SALT, max(iterations, 1))
    return ScramCredentialUpsertion(name, mechanism, iterations, SALT, salted)


async def alter(
    store: ScramCredentialStore, upserts=(), deletions=()
) -> dict[str, tuple[int, Any]]:  # type: ignore[no-untyped-def]
    handler = AlterUserScramCredentialsHandler(store)
    request = AlterUserScramCredentialsRequest(
        deletions=tuple(deletions), upsertions=tuple(upserts)
    )
    response = await handler.handle(FakeRequest(request))  # type: ignore[arg-type]
    return {r.user: (r.error_code, r.error_message) for r in response.results}


async def describe(store: ScramCredentialStore, users: Any) -> Any:
    handler = DescribeUserScramCredentialsHandler(store)
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else tuple(UserName(u) for u in users)
    )
    return await handler.handle(FakeRequest(request))  # type: ignore[arg-type]


async def test_upserted_credentials_survive_a_restart_and_authenticate(tmp_path: Path) -> None:
    path = tmp_path / CREDENTIALS_FILE
    results = await alter(ScramCredentialStore(path), [upsertion("alice", "secret-pw")])
    assert results == {"alice": (ErrorCode.NONE, None)}
    reopened = ScramCredentialStore(path)
    server = ScramSaslServer("SCRAM-SHA-256", reopened.get)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "secret-pw")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    assert server.complete


async def test_the_file_holds_keys_and_never_the_password(tmp_path: Path) -> None:
    path = tmp_path / CREDENTIALS_FILE
    await alter(ScramCredentialStore(path), [upsertion("alice", "very-secret-password")])
    text = path.read_text()
    salted = hashlib.pbkdf2_hmac("sha256", b"very-secret-password", SALT, 4096)
    assert "very-secret-password" not in text
    assert salted.hex() not in text and salted not in path.read_bytes()
    stored = json.loads(text)["users"]["alice"]["SCRAM-SHA-256"]
    assert set(stored) == {"salt", "stored_key", "server_key", "iterations"}
    assert stored["iterations"] == 4096


async def test_iterations_outside_4096_to_16384_are_unacceptable(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    results = await alter(
        store, [upsertion("a", iterations=4095), upsertion("b", iterations=16385)]
    )
    assert results["a"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert results["b"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert store.users() == []


async def test_unknown_mechanisms_and_empty_names_are_refused(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    results = await alter(store, [upsertion("a", mechanism=7), upsertion("")])
    assert results["a"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert results[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL


async def test_a_user_altered_twice_in_one_request_is_a_duplicate(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    results = await alter(
        store,
        [upsertion("a"), upsertion("a", mechanism=2), upsertion("b")],
    )
    assert results["a"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert results["b"] == (ErrorCode.NONE, None)
    assert store.users() == ["b"]


async def test_deleting_a_missing_credential_is_not_found(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    await alter(store, [upsertion("a")])
    results = await alter(
        store, deletions=[ScramCredentialDeletion("a", 2), ScramCredentialDeletion("z", 1)]
    )
    assert results["a"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert results["z"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert (await alter(store, deletions=[ScramCredentialDeletion("a", 1)])) == {
        "a": (ErrorCode.NONE, None)
    }
    assert store.get("a", "SCRAM-SHA-256") is None
    assert ScramCredentialStore(tmp_path / CREDENTIALS_FILE).users() == []


async def test_describe_lists_mechanisms_and_iterations_of_every_user(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    await alter(store, [upsertion("a", iterations=8192)])
    await alter(store, [upsertion("a", mechanism=2)])
    await alter(store, [upsertion("b")])
    for users in (None, []):
        response = await describe(store, users)
        assert response.error_code == ErrorCode.NONE
        described = {
            r.user: [(c.mechanism, c.iterations) for c in r.credential_infos]
            for r in response.results
        }
        assert described == {"a": [(1, 8192), (2, 4096)], "b": [(1, 4096)]}


async def test_describe_reports_unknown_and_duplicated_users(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path / CREDENTIALS_FILE)
    await alter(store, [upsertion("a")])
    response = await describe(store, ["a", "ghost", "b", "b"])
    codes = {r.user: r.error_code for r in response.results}
    assert codes == {
        "a": ErrorCode.NONE,
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
        "b": ErrorCode.DUPLICATE_RESOURCE,
    }


def test_stored_keys_match_the_rfc_5802_derivation() -> None:
    info = MECHANISM_BY_NAME["SCRAM-SHA-512"]
    credential = ScramCredential.from_password(info, "pencil", SALT, 4096)
    _salt, stored, server, iterations = scramp.ScramMechanism("SCRAM-SHA-512").make_auth_info(
        "pencil", iteration_count=4096, salt=SALT
    )
    assert (credential.stored_key, credential.server_key, credential.iterations) == (
        stored,
        server,
        iterations,
    )
