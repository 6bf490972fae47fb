"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

Kafka's rules (ScramControlManager): each user at most once per request
(DUPLICATE_RESOURCE), a non-empty name, a known mechanism (UNSUPPORTED_SASL_MECHANISM),
4096..16384 iterations (UNACCEPTABLE_CREDENTIAL), and only existing credentials can be
deleted (RESOURCE_NOT_FOUND). The client sends the salted password; only the derived
StoredKey and ServerKey are kept. One request's valid changes are applied together.

Authorization: Kafka requires ALTER (51) or DESCRIBE (50) on the CLUSTER resource; a
denied request gets CLUSTER_AUTHORIZATION_FAILED per user.
"""

from __future__ import annotations

from collections import Counter

import trio

from broker.handlers.auth_helper import authorize_cluster
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from broker.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from broker.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_BY_NAME,
    MECHANISM_BY_TYPE,
    MIN_ITERATIONS,
    ScramCredential,
    ScramCredentialStore,
)

MIN_SALT_BYTES = 12  # scramp's minimum; Kafka's own clients send 20 or more


class DescribeUserScramCredentialsHandler:
    api_key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    min_version = 0
    max_version = 0

    def __init__(self, store: ScramCredentialStore, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._store = store
        self._authorizer = authorizer

    async def handle(
        self, request: Request[DescribeUserScramCredentialsRequest]
    ) -> DescribeUserScramCredentialsResponse:
        body = request.body
        if not authorize_cluster(self._authorizer, request, AclOperation.DESCRIBE):
            return self.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not body.users:
            users = self._store.users()
            return DescribeUserScramCredentialsResponse(
                results=tuple(self._describe(user) for user in users)
            )
        counts = Counter(u.name for u in body.users)
        results = []
        for name in dict.fromkeys(u.name for u in body.users):
            if counts[name] > 1:
                results.append(
                    DescribeUserScramCredentialsResult(
                        user=name,
                        error_code=ErrorCode.DUPLICATE_RESOURCE,
                        error_message=(
                            "Cannot describe SCRAM credentials for the same user twice in a "
                            f"single request: {name}"
                        ),
                    )
                )
            elif not self._store.mechanisms_of(name):
                results.append(
                    DescribeUserScramCredentialsResult(
                        user=name,
                        error_code=ErrorCode.RESOURCE_NOT_FOUND,
                        error_message=f"Attempt to describe a user credential that does not "
                        f"exist: {name}",
                    )
                )
            else:
                results.append(self._describe(name))
        return DescribeUserScramCredentialsResponse(results=tuple(results))

    def _describe(self, user: str) -> DescribeUserScramCredentialsResult:
        return DescribeUserScramCredentialsResult(
            user=user,
            error_code=ErrorCode.NONE,
            error_message=None,
            credential_infos=tuple(
                CredentialInfo(mechanism=MECHANISM_BY_NAME[name].type_id, iterations=iterations)
                for name, iterations in self._store.mechanisms_of(user)
            ),
        )

    def error_response(
        self, request: Request, error_code: int
    ) -> DescribeUserScramCredentialsResponse:
        return DescribeUserScramCredentialsResponse(error_code=error_code)


class AlterUserScramCredentialsHandler:
    api_key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    min_version = 0
    max_version = 0

    def __init__(self, store: ScramCredentialStore, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._store = store
        self._authorizer = authorizer
        self._lock = trio.Lock()  # one change at a time: each rewrites the whole file

    async def handle(
        self, request: Request[AlterUserScramCredentialsRequest]
    ) -> AlterUserScramCredentialsResponse:
        body = request.body
        if not authorize_cluster(self._authorizer, request, AclOperation.ALTER):
            return self.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        async with self._lock:
            return await self._alter(body)

    async def _alter(
        self, body: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        counts = Counter([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        errors: dict[str, tuple[int, str]] = {}
        deletions: dict[str, tuple[str, str]] = {}
        upserts: dict[str, tuple[tuple[str, str], ScramCredential]] = {}
        for name, count in counts.items():
            if count > 1:
                errors[name] = (
                    ErrorCode.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                )
        for deletion in body.deletions:
            if deletion.name in errors:
                continue
            error = _check_name_and_mechanism(deletion.name, deletion.mechanism)
            mechanism = MECHANISM_BY_TYPE.get(deletion.mechanism)
            if error is None and mechanism and not self._store.get(deletion.name, mechanism.name):
                error = (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            if error is not None:
                errors[deletion.name] = error
            elif mechanism is not None:
                deletions[deletion.name] = (deletion.name, mechanism.name)
        for upsertion in body.upsertions:
            if upsertion.name in errors:
                continue
            error = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
            if error is None:
                error = _check_upsertion(upsertion.iterations, bytes(upsertion.salt))
            mechanism = MECHANISM_BY_TYPE.get(upsertion.mechanism)
            if error is not None:
                errors[upsertion.name] = error
            elif mechanism is not None:
                credential = ScramCredential.from_salted_password(
                    mechanism,
                    bytes(upsertion.salt),
                    bytes(upsertion.salted_password),
                    upsertion.iterations,
                )
                upserts[upsertion.name] = ((upsertion.name, mechanism.name), credential)
        if deletions or upserts:
            changes = dict(upserts.values())
            try:
                await self._store.alter(changes, deletions.values())
            except OSError as exc:
                for name in [*deletions, *upserts]:
                    errors[name] = (
                        ErrorCode.UNKNOWN_SERVER_ERROR,
                        f"could not store the credentials: {exc}",
                    )
                deletions.clear()
                upserts.clear()
        results = [
            AlterUserScramCredentialsResult(
                user=name, error_code=ErrorCode.NONE, error_message=None
            )
            for name in [*deletions, *upserts]
        ]
        results += [
            AlterUserScramCredentialsResult(user=name, error_code=code, error_message=message)
            for name, (code, message) in errors.items()
        ]
        return AlterUserScramCredentialsResponse(results=tuple(results))

    def error_response(
        self, request: Request, error_code: int
    ) -> AlterUserScramCredentialsResponse:
        body: AlterUserScramCredentialsRequest = request.body
        names = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return AlterUserScramCredentialsResponse(
            results=tuple(
                AlterUserScramCredentialsResult(user=name, error_code=error_code) for name in names
            )
        )


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(iterations: int, salt: bytes) -> tuple[int, str] | None:
    if iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if len(salt) < MIN_SALT_BYTES:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salt must be at least {MIN_SALT_BYTES} bytes"
    return None
