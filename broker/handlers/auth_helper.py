"""Kafka's AuthHelper: the questions handlers ask the authorizer about a request.

The principal and client host come from the request's connection context, so
handlers name only the operation and the resource.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.errors import KafkaError
from broker.handlers.common import AUTHORIZED_OPERATIONS_OMITTED
from broker.net.request import Request
from broker.protocol.error_codes import ErrorCode
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.security.authorizer import Authorizer

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


def authorize(
    authorizer: Authorizer,
    request: Request,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> bool:
    if not authorizer.enabled:
        return True
    context = request.context
    return authorizer.authorize(
        context.principal, context.client_address, operation, resource_type, name
    )


def authorize_cluster(authorizer: Authorizer, request: Request, operation: AclOperation) -> bool:
    return authorize(authorizer, request, operation, CLUSTER, CLUSTER_NAME)


def authorized_names(
    authorizer: Authorizer,
    request: Request,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """Kafka's filterByAuthorized: the names (each checked once) the request may act on."""
    if not authorizer.enabled:
        return set(names)
    return {
        name
        for name in set(names)
        if authorize(authorizer, request, operation, resource_type, name)
    }


def authorized_operations(
    authorizer: Authorizer,
    request: Request,
    resource_type: ResourceType,
    name: str,
    *,
    requested: bool = True,
) -> int:
    """The `*_authorized_operations` bit field, or Kafka's "omitted" value when not asked."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    context = request.context
    return authorizer.authorized_operations(
        context.principal, context.client_address, resource_type, name
    )


CONFIG_TOPIC = 2
"""ConfigResource.Type TOPIC; every other config resource (BROKER, BROKER_LOGGER) is
authorized on the cluster, as in Kafka's ConfigHelper."""


def check_config_resource(
    authorizer: Authorizer,
    request: Request,
    operation: AclOperation,
    config_resource_type: int,
    name: str,
) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource, or its authorization error."""
    if config_resource_type == CONFIG_TOPIC:
        if not authorize(authorizer, request, operation, TOPIC, name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    elif not authorize_cluster(authorizer, request, operation):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")


def cluster_authorized_operations(authorizer: Authorizer, request: Request, requested: bool) -> int:
    """Metadata's and DescribeCluster's field: filled only for a principal that may
    DESCRIBE the cluster (0 otherwise), as Kafka does."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorize_cluster(authorizer, request, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(authorizer, request, CLUSTER, CLUSTER_NAME)


def check_group(
    authorizer: Authorizer, request: Request, operation: AclOperation, group_id: str
) -> None:
    """The group APIs refuse the whole request when the group is not authorized."""
    if not authorize(authorizer, request, operation, GROUP, group_id):
        raise KafkaError(
            ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized on group {group_id}"
        )


def check_cluster(authorizer: Authorizer, request: Request, operation: AclOperation) -> None:
    """APIs authorized on the cluster as a whole refuse the request without it
    (DescribeUserScramCredentials: DESCRIBE; AlterUserScramCredentials: ALTER)."""
    if not authorize_cluster(authorizer, request, operation):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
