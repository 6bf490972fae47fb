"""Client-quota entities: who a quota is for, and Kafka's precedence between them.

An entity is a set of (type, name) pairs, with a None name for `<default>`, exactly
as AlterClientQuotas and DescribeClientQuotas carry it. A client is identified by
its user principal and client id; the quota that applies to it is the first
configured entity in Kafka's precedence order, and the metric tags Kafka shares a
sensor under follow from which entity matched.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import attrs

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

CLIENT_KEYS = (
    PRODUCER_BYTE_RATE,
    CONSUMER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    CONTROLLER_MUTATION_RATE,
)
IP_KEYS = (CONNECTION_CREATION_RATE,)
WHOLE_NUMBER_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE})
"""Kafka defines these as long/int configs, so fractional values are refused."""

DEFAULT_DISPLAY = "<default>"


@attrs.frozen
class ClientQuotaEntity:
    """Sorted (type, name) pairs; a None name is the type's `<default>`."""

    entries: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
        """Validated entity: known types, each once, and only Kafka's combinations."""
        entries = tuple(sorted(pairs, key=lambda pair: pair[0]))
        types = [entity_type for entity_type, _ in entries]
        if not entries:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
        for entity_type in types:
            if entity_type not in ENTITY_TYPES:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}"
                )
        if len(set(types)) != len(types):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, "Invalid client quota entity: duplicate entity types"
            )
        if IP in types and len(types) > 1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Invalid quota entity combination, IP entity should not be combined with "
                "User or ClientId entities.",
            )
        for entity_type, name in entries:
            if entity_type == IP and name is not None and not _is_ip_address(name):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"{name} is not a valid IP address")
        return cls(entries)

    @property
    def types(self) -> frozenset[str]:
        return frozenset(entity_type for entity_type, _ in self.entries)

    def name(self, entity_type: str) -> str | None:
        for candidate, name in self.entries:
            if candidate == entity_type:
                return name
        raise KeyError(entity_type)

    @property
    def is_ip(self) -> bool:
        return self.types == {IP}

    def valid_keys(self) -> tuple[str, ...]:
        return IP_KEYS if self.is_ip else CLIENT_KEYS

    def __str__(self) -> str:
        return ", ".join(
            f"{entity_type}={DEFAULT_DISPLAY if name is None else name}"
            for entity_type, name in self.entries
        )


def _is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def user_entity(user: str | None) -> ClientQuotaEntity:
    return ClientQuotaEntity(((USER, user),))


def client_entity(client_id: str | None) -> ClientQuotaEntity:
    return ClientQuotaEntity(((CLIENT_ID, client_id),))


def user_client_entity(user: str | None, client_id: str | None) -> ClientQuotaEntity:
    return ClientQuotaEntity(((CLIENT_ID, client_id), (USER, user)))


def ip_entity(ip: str | None) -> ClientQuotaEntity:
    return ClientQuotaEntity(((IP, ip),))


@attrs.frozen
class MetricTags:
    """The `user` and `client-id` tags a quota sensor is shared under ("" when unused)."""

    user: str
    client_id: str


def precedence(user: str, client_id: str) -> tuple[tuple[ClientQuotaEntity, MetricTags], ...]:
    """Kafka's order, most specific first, with the sensor tags each match implies:
    /users/u/clients/c, /users/u/clients/<default>, /users/u, /users/<default>/clients/c,
    /users/<default>/clients/<default>, /users/<default>, /clients/c, /clients/<default>."""
    both = MetricTags(user, client_id)
    user_only = MetricTags(user, "")
    client_only = MetricTags("", client_id)
    return (
        (user_client_entity(user, client_id), both),
        (user_client_entity(user, None), both),
        (user_entity(user), user_only),
        (user_client_entity(None, client_id), both),
        (user_client_entity(None, None), both),
        (user_entity(None), user_only),
        (client_entity(client_id), client_only),
        (client_entity(None), client_only),
    )


def user_of(principal: str) -> str:
    """The user name of a principal ("User:alice" is "alice"), as quota entities name it."""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else principal
