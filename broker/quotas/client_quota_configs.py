"""The configured client quotas: what AlterClientQuotas changes and DescribeClientQuotas reads.

Kept as a plain mapping from entity to {key: value}; validation follows Kafka's
ClientQuotaControlManager so that a request Kafka refuses is refused here with
the same error code, and an alteration is applied whole or not at all per entity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

import attrs

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.quotas.client_quota_entity import (
    CLIENT_ID,
    IP,
    USER,
    WHOLE_NUMBER_KEYS,
    ClientQuotaEntity,
)

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


@attrs.frozen
class QuotaOp:
    """Set `key` to `value`, or remove it."""

    key: str
    value: float = 0.0
    remove: bool = False


@attrs.frozen
class FilterComponent:
    """DescribeClientQuotas' ComponentData: match a name, the default, or any name."""

    entity_type: str
    match_type: int
    match: str | None = None

    def matches(self, name: str | None) -> bool:
        if self.match_type == MATCH_EXACT:
            return name is not None and name == self.match
        if self.match_type == MATCH_DEFAULT:
            return name is None
        return name is not None


def validate_ops(entity: ClientQuotaEntity, ops: Iterable[QuotaOp]) -> list[QuotaOp]:
    """The ops, or INVALID_REQUEST for a key the entity cannot have, a duplicate key, or a
    bad value."""
    seen: set[str] = set()
    checked = []
    valid = entity.valid_keys()
    for op in ops:
        if op.key in seen:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {op.key}")
        seen.add(op.key)
        if op.key not in valid:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Invalid configuration key {op.key} for {entity}"
            )
        if not op.remove:
            if not math.isfinite(op.value) or op.value <= 0:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Quota {op.key} must be a positive number, got {op.value}",
                )
            if op.key in WHOLE_NUMBER_KEYS and op.value != int(op.value):
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Configuration {op.key} must be a whole number, got {op.value}",
                )
        checked.append(op)
    return checked


def validate_filter(components: Iterable[FilterComponent]) -> list[FilterComponent]:
    result = []
    types: set[str] = set()
    for component in components:
        if component.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Custom entity type '{component.entity_type}' not supported",
            )
        if component.entity_type in types:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Duplicate {component.entity_type} filter component entity type",
            )
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}"
            )
        if component.match_type == MATCH_EXACT and component.match is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Exact match needs a name")
        types.add(component.entity_type)
        result.append(component)
    if IP in types and types & {USER, CLIENT_ID}:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return result


class ClientQuotaConfigs:
    """Entity -> {quota key: value}; entities with no quota left are dropped."""

    def __init__(self, initial: Mapping[ClientQuotaEntity, Mapping[str, float]] = {}) -> None:
        self._quotas: dict[ClientQuotaEntity, dict[str, float]] = {
            entity: dict(values) for entity, values in initial.items() if values
        }

    def __iter__(self) -> Iterator[tuple[ClientQuotaEntity, Mapping[str, float]]]:
        return iter(list(self._quotas.items()))

    def __len__(self) -> int:
        return len(self._quotas)

    def get(self, entity: ClientQuotaEntity) -> Mapping[str, float]:
        return self._quotas.get(entity, {})

    def value(self, entity: ClientQuotaEntity, key: str) -> float | None:
        values = self._quotas.get(entity)
        return None if values is None else values.get(key)

    def altered(self, entity: ClientQuotaEntity, ops: Iterable[QuotaOp]) -> dict[str, float]:
        """The entity's values after `ops` (not applied)."""
        return apply_ops(self._quotas.get(entity, {}), ops)

    def set(self, entity: ClientQuotaEntity, values: Mapping[str, float]) -> None:
        if values:
            self._quotas[entity] = dict(values)
        else:
            self._quotas.pop(entity, None)

    def describe(
        self, components: Iterable[FilterComponent], strict: bool
    ) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
        """Entities matching every component (and, when strict, no other type)."""
        wanted = list(components)
        wanted_types = {c.entity_type for c in wanted}
        found = []
        for entity, values in self._quotas.items():
            types = entity.types
            if strict and types != wanted_types:
                continue
            if not wanted_types <= types:
                continue
            if all(c.matches(entity.name(c.entity_type)) for c in wanted):
                found.append((entity, dict(values)))
        return found


def apply_ops(values: Mapping[str, float], ops: Iterable[QuotaOp]) -> dict[str, float]:
    """`values` after `ops`, in order (a later op on a key wins); `values` is unchanged."""
    result = dict(values)
    for op in ops:
        if op.remove:
            result.pop(op.key, None)
        else:
            result[op.key] = op.value
    return result
