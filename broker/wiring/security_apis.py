"""Wiring of the security APIs: SASL (advertised; answered by the network layer) and
SCRAM credential management over the broker's credential store."""

from __future__ import annotations

from broker.broker_context import BrokerContext
from broker.handlers.sasl_apis import SaslAuthenticateHandler, SaslHandshakeHandler
from broker.handlers.scram_credentials_apis import (
    AlterUserScramCredentialsHandler,
    DescribeUserScramCredentialsHandler,
)
from broker.security.scram_credentials import ScramCredentialStore


def add_security_apis(context: BrokerContext, store: ScramCredentialStore) -> None:
    for handler in (
        SaslHandshakeHandler(),
        SaslAuthenticateHandler(),
        DescribeUserScramCredentialsHandler(store, authorizer=context.authorizer),
        AlterUserScramCredentialsHandler(store, authorizer=context.authorizer),
    ):
        context.apis.add_handler(handler)
