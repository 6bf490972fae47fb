"""Wiring of the authorizer and the ACL APIs into the broker.

The authorizer is created once, from `authorizer.class.name`, `super.users` and
`allow.everyone.if.no.acl.found`, with the ACLs stored under the first log dir,
before any handler: every handler is given it explicitly. The ACL APIs are
registered whether or not it is on, as in Kafka (they answer SECURITY_DISABLED
when it is off).
"""

from __future__ import annotations

from broker.broker_context import BrokerContext
from broker.config import BrokerConfig
from broker.handlers.create_acls import CreateAclsHandler
from broker.handlers.delete_acls import DeleteAclsHandler
from broker.handlers.describe_acls import DescribeAclsHandler
from broker.security.acl_store import AclStore
from broker.security.authorizer import Authorizer, create_authorizer


def load_authorizer(config: BrokerConfig, store: AclStore) -> Authorizer:
    """The configured authorizer with the stored ACLs (none are read when it is off)."""
    class_name = config.security.authorizer_class_name
    return create_authorizer(
        class_name,
        store.load() if class_name else (),
        config.security.super_users,
        config.security.allow_everyone_if_no_acl_found,
    )


def add_acl_apis(context: BrokerContext, store: AclStore) -> None:
    for handler in (
        CreateAclsHandler(context.authorizer, store),
        DescribeAclsHandler(context.authorizer),
        DeleteAclsHandler(context.authorizer, store),
    ):
        context.apis.add_handler(handler)
