"""DescribeCluster (key 60): this broker, as advertised on the request's listener."""

from __future__ import annotations

from collections.abc import Callable

from broker.handlers.auth_helper import cluster_authorized_operations
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from broker.protocol.messages.describe_cluster_response import DescribeClusterBroker
from broker.security.authorizer import ALLOW_ALL, Authorizer
from broker.topology import SingleProcessTopology, Topology

API_KEY = ApiKey.DESCRIBE_CLUSTER
BROKERS_ENDPOINT = 1


class DescribeClusterHandler:
    api_key = API_KEY
    min_version = 0
    max_version = 1

    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        advertised: Callable[[str], tuple[str, int]],
        *,
        authorizer: Authorizer = ALLOW_ALL,
        topology: Topology | None = None,
    ) -> None:
        self._authorizer = authorizer
        self._cluster_id = cluster_id
        self._topology = topology or SingleProcessTopology(node_id, advertised)

    async def handle(self, request: Request[DescribeClusterRequest]) -> DescribeClusterResponse:
        body = request.body
        if request.api_version >= 1 and body.endpoint_type != BROKERS_ENDPOINT:
            # Kafka: a broker only describes broker endpoints; controllers are not exposed.
            return DescribeClusterResponse(
                error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                error_message=(
                    f"The request was sent to an endpoint of type BROKER, but we wanted an "
                    f"endpoint of type {body.endpoint_type}"
                ),
                endpoint_type=body.endpoint_type,
                cluster_id=self._cluster_id,
                controller_id=-1,
            )
        brokers = tuple(
            DescribeClusterBroker(broker_id=n, host=h, port=p, rack=self._topology.rack(n))
            for n, h, p in self._topology.brokers(request.context.listener_name)
        )
        return DescribeClusterResponse(
            error_code=ErrorCode.NONE,
            endpoint_type=BROKERS_ENDPOINT,
            cluster_id=self._cluster_id,
            controller_id=self._topology.controller_id(),
            brokers=brokers,
            cluster_authorized_operations=cluster_authorized_operations(
                self._authorizer, request, body.include_cluster_authorized_operations
            ),
        )

    def error_response(self, request: Request, error_code: int) -> DescribeClusterResponse:
        return DescribeClusterResponse(error_code=error_code, cluster_id=self._cluster_id)
