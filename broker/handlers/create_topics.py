"""CreateTopics (key 19): topics on this single broker, per-topic errors with messages.

Replication factor 1 (or -1, the default) is the only one honoured: a partition
has one replica, on its leader. A larger factor is INVALID_REPLICATION_FACTOR,
with Kafka's wording when it exceeds the registered brokers (the processes of a
cluster, each a broker in Metadata) and saying replication is not supported
when there would be brokers enough.
Manual assignments are accepted when they describe what we would do anyway:
partitions 0..n-1, each on this broker alone. v5+ answers with the resulting
partition count, replication factor and configs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from broker.config import BrokerConfig
from broker.errors import KafkaError
from broker.handlers.auth_helper import TOPIC, authorize, authorize_cluster
from broker.handlers.log_view import LogManagerView, TopicView
from broker.handlers.topic_configs import topic_config_entries
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from broker.protocol.messages.create_topics_request import CreatableTopic
from broker.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.CREATE_TOPICS


class CreateTopicsHandler:
    api_key = API_KEY
    min_version = 2
    max_version = 7

    def __init__(
        self,
        log_manager: LogManagerView,
        broker_config: BrokerConfig,
        *,
        authorizer: Authorizer = ALLOW_ALL,
        registered_brokers: Callable[[], int] | None = None,
        max_replication_factor: Callable[[], int] | None = None,
    ) -> None:
        self._logs = log_manager
        self._registered_brokers = registered_brokers or (lambda: 1)
        self._max_replication_factor = max_replication_factor or (lambda: 1)
        self._config = broker_config
        self._node_id = broker_config.node_id
        self._authorizer = authorizer

    async def handle(self, request: Request[CreateTopicsRequest]) -> CreateTopicsResponse:
        body = request.body
        counts = Counter(t.name for t in body.topics)
        auth = self._authorizer
        cluster_create = authorize_cluster(auth, request, AclOperation.CREATE)
        results = []
        for wanted in body.topics:
            if not cluster_create and not authorize(
                auth, request, AclOperation.CREATE, TOPIC, wanted.name
            ):
                results.append(
                    error_result(
                        wanted.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
                    )
                )
                continue
            if counts[wanted.name] > 1:
                results.append(
                    error_result(
                        wanted.name,
                        ErrorCode.INVALID_REQUEST,
                        "Found multiple entries for this topic in the request",
                    )
                )
                continue
            try:
                topic = await self._create(wanted, body.validate_only)
            except KafkaError as exc:
                results.append(error_result(wanted.name, exc.error_code, exc.message))
                continue
            if authorize(auth, request, AclOperation.DESCRIBE_CONFIGS, TOPIC, topic.name):
                results.append(self._result(topic))
            else:
                # Kafka hides the configs of a topic the creator may not describe.
                results.append(
                    self._result(topic, with_configs=False)._replace(
                        topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                )
        return CreateTopicsResponse(topics=tuple(results))

    async def _create(self, wanted: CreatableTopic, validate_only: bool) -> TopicView:
        partitions, replication = wanted.num_partitions, wanted.replication_factor
        if wanted.assignments:
            if partitions != -1 or replication != -1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            partitions = self._check_assignments(
                [(a.partition_index, a.broker_ids) for a in wanted.assignments]
            )
            replication = 1
        if partitions == -1:
            partitions = self._logs.default_partitions
        if replication == -1:
            replication = self._config.log.default_replication_factor
        if not 1 <= replication <= self._max_replication_factor():
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                replication_refused(replication, self._registered_brokers()),
            )
        configs = {}
        for config in wanted.configs:
            if config.value is None:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Null value not supported for topic configs: {config.name}",
                )
            configs[config.name] = config.value
        return await self._logs.create_topic(
            wanted.name, partitions, replication, configs, validate_only=validate_only
        )

    def _check_assignments(self, assignments: list[tuple[int, tuple[int, ...]]]) -> int:
        indexes = sorted(index for index, _ in assignments)
        if indexes != list(range(len(assignments))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be consecutive integers starting from 0",
            )
        for index, brokers in assignments:
            if list(brokers) != [self._node_id]:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Partition {index} is assigned to brokers {list(brokers)}; only broker "
                    f"{self._node_id} exists",
                )
        return len(assignments)

    def _result(self, topic: TopicView, *, with_configs: bool = True) -> CreatableTopicResult:
        entries = (
            topic_config_entries(
                topic,
                self._config,
                self._logs.topic_config_defaults(),
                None,
                include_synonyms=False,
                include_documentation=False,
            )
            if with_configs
            else []
        )
        return CreatableTopicResult(
            name=topic.name,
            topic_id=topic.topic_id,
            error_code=ErrorCode.NONE,
            error_message=None,
            num_partitions=len(topic.partitions),
            replication_factor=1,
            configs=tuple(
                CreatableTopicConfigs(
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.config_source,
                    is_sensitive=e.is_sensitive,
                )
                for e in entries
            ),
        )

    def error_response(self, request: Request, error_code: int) -> CreateTopicsResponse:
        body: CreateTopicsRequest = request.body
        return CreateTopicsResponse(
            topics=tuple(error_result(t.name, error_code) for t in body.topics)
        )


def error_result(name: str, error_code: int, message: str | None = None) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=name,
        error_code=error_code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )


def replication_refused(replication: int, brokers: int) -> str:
    """Why a replication factor other than 1 is refused, with both numbers true."""
    if replication < 1:
        return "Replication factor must be larger than 0, or -1 to use the default value."
    if replication > brokers:
        return (
            f"Unable to replicate the partition {replication} time(s): The target "
            f"replication factor of {replication} cannot be reached because only "
            f"{brokers} broker(s) are registered."
        )
    return (
        f"Replication factor {replication} is not supported: {brokers} broker(s) are "
        "registered, but partitions are not replicated here (each has one replica, on "
        "its leader); use replication factor 1."
    )
