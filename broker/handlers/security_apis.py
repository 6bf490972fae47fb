"""Wiring of the security APIs: SASL (advertised; answered by the network layer) and
SCRAM credential management over the broker's credential store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.handlers.sasl_apis import SaslAuthenticateHandler, SaslHandshakeHandler
from broker.handlers.scram_credentials_apis import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)

if TYPE_CHECKING:
    from broker.server import KafkaServer


def add_security_apis(server: KafkaServer) -> None:
    store = server.scram_credentials
    for handler in (
        SaslHandshakeHandler(),
        SaslAuthenticateHandler(),
        DescribeUserScramCredentialsHandler(store),
        AlterUserScramCredentialsHandler(store),
    ):
        server.apis.add_handler(handler)
