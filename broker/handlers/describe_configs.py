"""DescribeConfigs (key 32) for topics and this broker."""

from __future__ import annotations

from collections.abc import Callable

from broker.config import BrokerConfig
from broker.config.types import ConfigSource, ResourceType
from broker.errors import KafkaError
from broker.handlers.auth_helper import check_config_resource
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.common import error_code_of, error_message_of
from broker.handlers.log_view import LogManagerView
from broker.handlers.topic_configs import topic_config_entries
from broker.handlers.topic_resource import find_topic
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse
from broker.protocol.messages.describe_configs_request import DescribeConfigsResource
from broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

API_KEY = ApiKey.DESCRIBE_CONFIGS
CLEANER_STATE_KEY = "cleaner.state"
"""Not a Kafka config: asked for by name only (so no Kafka tool ever sees it), it
answers the log cleaner's state of each partition of a compacted topic as JSON, for
`broker client topics describe` (Kafka shows that only in its metrics)."""


class DescribeConfigsHandler:
    api_key = API_KEY
    min_version = 1
    max_version = 4

    def __init__(
        self,
        log_manager: LogManagerView,
        broker_config: BrokerConfig,
        brokers: BrokerConfigs,
        *,
        authorizer: Authorizer = ALLOW_ALL,
        cleaner_state: Callable[[str], str | None] | None = None,
    ) -> None:
        self._logs = log_manager
        self._cleaner_state = cleaner_state
        self._broker_config = broker_config
        self._brokers = brokers
        self._authorizer = authorizer

    async def handle(self, request: Request[DescribeConfigsRequest]) -> DescribeConfigsResponse:
        body = request.body
        include_documentation = request.api_version >= 3 and body.include_documentation
        results = []
        for resource in body.resources:
            try:
                check_config_resource(
                    self._authorizer,
                    request,
                    AclOperation.DESCRIBE_CONFIGS,
                    resource.resource_type,
                    resource.resource_name,
                )
                configs = self._describe(resource, body.include_synonyms, include_documentation)
            except KafkaError as exc:
                results.append(error_result(resource, error_code_of(exc), error_message_of(exc)))
                continue
            results.append(
                DescribeConfigsResult(
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=tuple(configs),
                )
            )
        return DescribeConfigsResponse(results=tuple(results))

    def _describe(
        self, resource: DescribeConfigsResource, synonyms: bool, documentation: bool
    ) -> list[DescribeConfigsResourceResult]:
        keys = resource.configuration_keys
        if resource.resource_type == ResourceType.TOPIC:
            topic = find_topic(self._logs, resource.resource_name)
            entries = topic_config_entries(
                topic,
                self._broker_config,
                self._logs.topic_config_defaults(),
                keys,
                include_synonyms=synonyms,
                include_documentation=documentation,
            )
            if keys is not None and CLEANER_STATE_KEY in keys and self._cleaner_state:
                state = self._cleaner_state(resource.resource_name)
                if state is not None:
                    entries.append(
                        DescribeConfigsResourceResult(
                            name=CLEANER_STATE_KEY,
                            value=state,
                            read_only=True,
                            is_default=False,
                            config_source=ConfigSource.DEFAULT_CONFIG,
                            is_sensitive=False,
                        )
                    )
            return entries
        if resource.resource_type == ResourceType.BROKER:
            return self._brokers.describe(
                resource.resource_name,
                keys,
                include_synonyms=synonyms,
                include_documentation=documentation,
            )
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}"
        )

    def error_response(self, request: Request, error_code: int) -> DescribeConfigsResponse:
        body: DescribeConfigsRequest = request.body
        return DescribeConfigsResponse(
            results=tuple(error_result(r, error_code) for r in body.resources)
        )


def error_result(
    resource: DescribeConfigsResource, error_code: int, message: str | None = None
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=error_code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
