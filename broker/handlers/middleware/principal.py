"""Principals given by a listener: the cluster's internal listener (the processes'
private Unix sockets) is authenticated by reaching its socket, and its connections
carry the cluster principal, as Kafka's inter-broker listener carries the broker's.

A principal reserved for an internal listener is refused on every other listener (a
client cannot take it by being named so, e.g. through SASL), so the middleware after
this one may trust it."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from broker.handlers.api_handler import ApiHandler, CloseConnection, Outcome
from broker.handlers.middleware import Next, Stage
from broker.net.request import CLUSTER_PRINCIPAL, Request

log = logging.getLogger(__name__)


class ListenerPrincipals:
    stage = Stage.PRINCIPAL

    def __init__(self, fixed: Mapping[str, str]) -> None:
        """`fixed`: listener name -> the principal of all its connections."""
        self._fixed = dict(fixed)
        self._reserved = frozenset({CLUSTER_PRINCIPAL, *fixed.values()})

    def applies_to(self, handler: ApiHandler) -> bool:
        """Only where a listener gives a principal (a cluster process): elsewhere no request
        is trusted as the cluster's (see ClusterActionAuthorization's `trusted`)."""
        return bool(self._fixed)

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        context = request.context
        fixed = self._fixed.get(context.listener_name)
        if fixed is not None:
            if context.principal != fixed:
                request.context = attrs.evolve(context, principal=fixed)
        elif context.principal in self._reserved:
            log.warning(
                "refusing %s on listener %s: the principal is the cluster's own",
                context.principal,
                context.listener_name,
            )
            return CloseConnection(f"principal {context.principal} is reserved")
        return await call_next(request)
