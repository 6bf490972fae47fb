"""ACLs survive on disk as they were made, and a file that is not ours stops the broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from broker.config import ConfigError
from broker.security.acl import AclBinding, AclOperation, ResourceType
from broker.security.acl_store import ACLS_FILE, AclStore, decode_acls, encode_acls
from broker.security.authorizer import StandardAuthorizer
from broker.wiring.acl_apis import load_authorizer
from tests.integration.broker_harness import base_config
from tests.security.acl_strategies import acl, binding_lists

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@given(binding_lists)
def test_encoded_acls_decode_to_the_same_set(acls: list[AclBinding]) -> None:
    assert set(decode_acls(encode_acls(acls))) == set(acls)


@given(binding_lists)
def test_the_encoding_does_not_depend_on_the_order_acls_were_made(acls: list[AclBinding]) -> None:
    assert encode_acls(acls) == encode_acls(list(reversed(acls)))


async def test_saved_acls_are_loaded_by_a_new_store(tmp_path: Path) -> None:
    acls = decode_acls(encode_acls([]))
    assert acls == []
    authorizer = StandardAuthorizer()
    authorizer.add_acls([acl("t", AclOperation.READ), acl("g", AclOperation.READ)])
    await AclStore(tmp_path).save(authorizer.bindings())
    assert set(AclStore(tmp_path).load()) == set(authorizer.bindings())
    assert not list(tmp_path.glob("*.tmp"))  # noqa: ASYNC240 - a tmp dir of a few files


def test_a_missing_file_is_no_acls_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    assert AclStore(tmp_path).load() == []
    (tmp_path / ACLS_FILE).write_text('{"version": 99}')
    with pytest.raises(ValueError, match="unknown ACL file format"):
        AclStore(tmp_path).load()
    (tmp_path / ACLS_FILE).write_text('{"version": 1, "acls": [{"name": "t"}]}')
    with pytest.raises(ValueError, match="malformed"):
        AclStore(tmp_path).load()


def test_the_configured_authorizer_starts_with_the_stored_acls(tmp_path: Path) -> None:
    AclStore(tmp_path).save_sync([acl("t", AclOperation.READ, principal="User:ANONYMOUS")])
    config = base_config(
        tmp_path / "data", {"authorizer.class.name": STANDARD, "super.users": "User:root"}
    )
    authorizer = load_authorizer(config, AclStore(tmp_path))
    assert authorizer.enabled
    assert authorizer.authorize("User:ANONYMOUS", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert not authorizer.authorize(
        "User:ANONYMOUS", "h", AclOperation.READ, ResourceType.TOPIC, "u"
    )
    assert authorizer.authorize("User:root", "h", AclOperation.READ, ResourceType.TOPIC, "u")
    off = load_authorizer(base_config(tmp_path / "data"), AclStore(tmp_path))
    assert not off.enabled


def test_an_unknown_authorizer_class_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        base_config(tmp_path, {"authorizer.class.name": "com.example.MyAuthorizer"})
