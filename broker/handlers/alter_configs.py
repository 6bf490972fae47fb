"""AlterConfigs (key 33, legacy) and IncrementalAlterConfigs (key 44), topics and broker.

AlterConfigs replaces a resource's whole dynamic config (keys not given revert
to their defaults); IncrementalAlterConfigs (KIP-339) applies SET, DELETE and,
for list configs, APPEND and SUBTRACT. Each resource succeeds or fails on its
own; `validate_only` checks everything and changes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from broker.config.topic_keys import LIST_TOPIC_CONFIGS
from broker.config.types import ResourceType, split_list
from broker.errors import KafkaError
from broker.handlers.auth_helper import check_config_resource
from broker.handlers.broker_configs import BrokerConfigs
from broker.handlers.log_view import LogManagerView
from broker.handlers.topic_resource import find_topic
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from broker.protocol.messages.alter_configs_response import AlterConfigsResourceResponse
from broker.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from broker.security.acl import AclOperation
from broker.security.authorizer import ALLOW_ALL, Authorizer

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@attrs.frozen
class Change:
    """One resource's requested change, reduced to sets and deletes."""

    set_: dict[str, str]
    delete: tuple[str, ...]


class ConfigAlterer:
    """Applies a Change to a topic or to this broker."""

    def __init__(self, log_manager: LogManagerView, brokers: BrokerConfigs) -> None:
        self.logs = log_manager
        self.brokers = brokers

    async def apply(
        self,
        resource_type: int,
        resource_name: str,
        change: Change,
        *,
        replace_all: bool,
        validate_only: bool,
    ) -> None:
        if resource_type == ResourceType.TOPIC:
            find_topic(self.logs, resource_name)
            await self.logs.alter_topic_configs(
                resource_name,
                change.set_,
                change.delete,
                replace_all=replace_all,
                validate_only=validate_only,
            )
        elif resource_type == ResourceType.BROKER:
            await self.brokers.alter(
                resource_name,
                change.set_,
                change.delete,
                replace_all=replace_all,
                validate_only=validate_only,
            )
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"
            )


def check_unique_keys(names: Sequence[str]) -> None:
    duplicates = sorted(k for k, n in Counter(names).items() if n > 1)
    if duplicates:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Error due to duplicate config keys: {', '.join(duplicates)}",
        )


def duplicate_resources(resources: Sequence[Any]) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, n in counts.items() if n > 1}


R = TypeVar("R")  # AlterConfigs v0-2 and IncrementalAlterConfigs resource responses


async def alter_each(
    alterer: ConfigAlterer,
    resources: Sequence[Any],
    to_change: Callable[[Any], Change],
    response: Callable[..., R],
    *,
    replace_all: bool,
    validate_only: bool,
    authorizer: Authorizer = ALLOW_ALL,
    request: Request | None = None,
) -> tuple[R, ...]:
    """Apply each resource's change on its own; a failure is that resource's error."""
    duplicates = duplicate_resources(resources)
    responses = []
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        try:
            if key in duplicates:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate resource in request")
            if request is not None:
                check_config_resource(authorizer, request, AclOperation.ALTER_CONFIGS, *key)
            check_unique_keys([c.name for c in resource.configs])
            await alterer.apply(
                resource.resource_type,
                resource.resource_name,
                to_change(resource),
                replace_all=replace_all,
                validate_only=validate_only,
            )
            code, message = ErrorCode.NONE, None
        except KafkaError as exc:
            code, message = exc.error_code, exc.message
        responses.append(
            response(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return tuple(responses)


def every_resource_failed(
    resources: Sequence[Any], response: Callable[..., R], error_code: int
) -> tuple[R, ...]:
    return tuple(
        response(
            error_code=error_code, resource_type=r.resource_type, resource_name=r.resource_name
        )
        for r in resources
    )


def set_all(resource: Any) -> Change:
    """AlterConfigs: the given values replace the whole dynamic config."""
    set_ = {}
    for config in resource.configs:
        if config.value is None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Null value not supported for : {config.name}",
            )
        set_[config.name] = config.value
    return Change(set_, ())


class AlterConfigsHandler:
    api_key = ApiKey.ALTER_CONFIGS
    min_version = 0
    max_version = 2

    def __init__(self, alterer: ConfigAlterer, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._alterer = alterer
        self._authorizer = authorizer

    async def handle(self, request: Request[AlterConfigsRequest]) -> AlterConfigsResponse:
        body = request.body
        responses = await alter_each(
            self._alterer,
            body.resources,
            set_all,
            AlterConfigsResourceResponse,
            replace_all=True,
            validate_only=body.validate_only,
            authorizer=self._authorizer,
            request=request,
        )
        return AlterConfigsResponse(responses=responses)

    def error_response(self, request: Request, error_code: int) -> AlterConfigsResponse:
        body: AlterConfigsRequest = request.body
        return AlterConfigsResponse(
            responses=every_resource_failed(
                body.resources, AlterConfigsResourceResponse, error_code
            )
        )


class IncrementalAlterConfigsHandler:
    api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    min_version = 0
    max_version = 1

    def __init__(self, alterer: ConfigAlterer, *, authorizer: Authorizer = ALLOW_ALL) -> None:
        self._alterer = alterer
        self._authorizer = authorizer

    async def handle(
        self, request: Request[IncrementalAlterConfigsRequest]
    ) -> IncrementalAlterConfigsResponse:
        body = request.body
        responses = await alter_each(
            self._alterer,
            body.resources,
            self._to_change,
            IncrementalResourceResponse,
            replace_all=False,
            validate_only=body.validate_only,
            authorizer=self._authorizer,
            request=request,
        )
        return IncrementalAlterConfigsResponse(responses=responses)

    def _to_change(self, resource: Any) -> Change:
        set_: dict[str, str] = {}
        delete: list[str] = []
        for config in resource.configs:
            op = config.config_operation
            if op == DELETE:
                delete.append(config.name)
                continue
            if op not in (SET, APPEND, SUBTRACT):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
            if config.value is None:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {config.name}"
                )
            if op == SET:
                set_[config.name] = config.value
                continue
            list_config = (
                resource.resource_type == ResourceType.TOPIC and config.name in LIST_TOPIC_CONFIGS
            )
            if not list_config:
                verb = "append" if op == APPEND else "subtract"
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {verb} is not allowed for config key: {config.name}",
                )
            topic = find_topic(self._alterer.logs, resource.resource_name)
            current = split_list(topic.config(config.name))
            values = split_list(config.value)
            if op == APPEND:
                merged = current + [v for v in values if v not in current]
            else:
                merged = [v for v in current if v not in values]
            set_[config.name] = ",".join(merged)
        return Change(set_, tuple(delete))

    def error_response(self, request: Request, error_code: int) -> IncrementalAlterConfigsResponse:
        body: IncrementalAlterConfigsRequest = request.body
        return IncrementalAlterConfigsResponse(
            responses=every_resource_failed(body.resources, IncrementalResourceResponse, error_code)
        )
