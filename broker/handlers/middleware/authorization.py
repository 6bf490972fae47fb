"""Cluster-action authorization: the APIs brokers send each other (WriteTxnMarkers,
AddPartitionsToTxn v4) need CLUSTER_ACTION on the cluster, as in Kafka. The cluster's
own principal (its internal listener's, see principal.py; `trusted`) holds it whatever
the ACLs say, so nothing needs configuring for the processes to talk; anyone else needs
the ACL.

A handler opts in with `cluster_action_from`: the first version that needs it."""

from __future__ import annotations

from collections.abc import Iterable

from broker.handlers.api_handler import ApiHandler, Outcome
from broker.handlers.auth_helper import authorize_cluster
from broker.handlers.middleware import Next, Stage
from broker.net.request import Request
from broker.protocol.error_codes import ErrorCode
from broker.security.acl import AclOperation
from broker.security.authorizer import Authorizer


def cluster_action_from(handler: ApiHandler) -> int | None:
    value = getattr(handler, "cluster_action_from", None)
    return value if isinstance(value, int) else None


class ClusterActionAuthorization:
    stage = Stage.AUTHORIZATION

    def __init__(self, authorizer: Authorizer, trusted: Iterable[str] = ()) -> None:
        """`trusted`: the principals internal listeners give (ListenerPrincipals refuses
        them on every other listener); they hold CLUSTER_ACTION without an ACL."""
        self._authorizer = authorizer
        self._trusted = frozenset(trusted)

    def applies_to(self, handler: ApiHandler) -> bool:
        return cluster_action_from(handler) is not None

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        first = cluster_action_from(handler)
        if first is not None and request.api_version >= first and not self.allowed(request):
            return handler.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await call_next(request)

    def allowed(self, request: Request) -> bool:
        return request.context.principal in self._trusted or authorize_cluster(
            self._authorizer, request, AclOperation.CLUSTER_ACTION
        )
