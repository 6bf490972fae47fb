"""AlterClientQuotas (key 49): set or remove quotas of user, client-id and ip entities.

Needs ALTER_CONFIGS on the cluster, as in Kafka. Each entity succeeds or fails
alone (INVALID_REQUEST for a bad entity, key or value). The new quotas are
written to disk before they take effect, so an acknowledged change survives a
restart and a failed write changes nothing; `validate_only` checks and stops. The
change is applied to the quotas as stored (under the file's lock), not to this
process's copy, so concurrent changes through several processes all last.
"""

from __future__ import annotations

from broker.errors import KafkaError
from broker.handlers.auth_helper import authorize_cluster
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import AlterClientQuotasRequest, AlterClientQuotasResponse
from broker.protocol.messages.alter_client_quotas_response import EntityData, EntryData
from broker.quotas.client_quota_configs import QuotaOp, validate_ops
from broker.quotas.client_quota_entity import ClientQuotaEntity
from broker.quotas.quota_managers import QuotaManagers
from broker.quotas.quota_store import QuotaStore
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS


class AlterClientQuotasHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 1

    def __init__(
        self, quotas: QuotaManagers, store: QuotaStore, *, authorizer: Authorizer = ALLOW_ALL
    ) -> None:
        self._quotas = quotas
        self._store = store
        self._authorizer = authorizer

    async def handle(self, request: Request[AlterClientQuotasRequest]) -> AlterClientQuotasResponse:
        body = request.body
        if not authorize_cluster(self._authorizer, request, AclOperation.ALTER_CONFIGS):
            return self.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results: list[tuple[int, str | None]] = []
        changes: dict[ClientQuotaEntity, list[QuotaOp]] = {}
        for entry in body.entries:
            try:
                entity = ClientQuotaEntity.of((e.entity_type, e.entity_name) for e in entry.entity)
                ops = validate_ops(entity, (QuotaOp(o.key, o.value, o.remove) for o in entry.ops))
            except KafkaError as exc:
                results.append((exc.error_code, str(exc)))
                continue
            changes.setdefault(entity, []).extend(ops)
            results.append((ErrorCode.NONE, None))
        if changes and not body.validate_only:
            async with self._store.lock:
                try:
                    stored = await self._store.update(changes)
                except (OSError, ValueError) as exc:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store client quotas: {exc}"
                    ) from exc
                # The file now also holds what other processes changed: take it all.
                self._quotas.set_all_quotas(stored)
        return AlterClientQuotasResponse(
            entries=tuple(
                EntryData(
                    error_code=code,
                    error_message=message,
                    entity=tuple(EntityData(e.entity_type, e.entity_name) for e in entry.entity),
                )
                for entry, (code, message) in zip(body.entries, results, strict=True)
            )
        )

    def error_response(self, request: Request, error_code: int) -> AlterClientQuotasResponse:
        body: AlterClientQuotasRequest = request.body
        return AlterClientQuotasResponse(
            entries=tuple(
                EntryData(
                    error_code=error_code,
                    error_message=None,
                    entity=tuple(EntityData(e.entity_type, e.entity_name) for e in entry.entity),
                )
                for entry in body.entries
            )
        )
