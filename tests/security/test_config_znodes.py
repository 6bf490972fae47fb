"""Kafka 2.x's entity-config znodes (`/config/users/<user>`, `/config/changes/...`) as
`kafka-configs.sh --zookeeper` writes them, encoded and decoded without a ZooKeeper."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.coordination.broker_registration import MalformedZnode
from broker.coordination.config_znodes import (
    decode_config_change,
    decode_entity_config,
    desanitize,
    encode_config_change,
    encode_entity_config,
    encode_quota_value,
    encode_scram_credential,
    entity_of,
    entity_path,
    quota_values_in,
    sanitize,
    scram_credentials_in,
    user_config_path,
)
from broker.quotas.client_quota_entity import CLIENT_ID, IP, USER, ClientQuotaEntity
from broker.security.scram_credentials import MECHANISM_BY_NAME, ScramCredential

credentials = st.builds(
    ScramCredential,
    st.binary(min_size=1, max_size=64),
    st.binary(min_size=32, max_size=64),
    st.binary(min_size=32, max_size=64),
    st.integers(4096, 16384),
)


@given(
    credentials,
    st.sampled_from(sorted(MECHANISM_BY_NAME)),
    st.dictionaries(
        st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage"]),
        st.integers(1, 1 << 30).map(str),
    ),
)
def test_a_users_credentials_survive_the_znode_with_its_quotas(
    credential: ScramCredential, mechanism: str, quotas: dict[str, str]
) -> None:
    config = {**quotas, mechanism: encode_scram_credential(credential)}
    decoded = decode_entity_config("/config/users/u", encode_entity_config(config))
    assert decoded == config
    assert scram_credentials_in("/config/users/u", decoded) == {mechanism: credential}


def test_the_credential_reads_as_kafkas_scram_credential_utils_writes_it() -> None:
    credential = ScramCredential(b"salt", b"s" * 32, b"k" * 32, 4096)
    text = encode_scram_credential(credential)
    assert text == (
        "salt=c2FsdA==,stored_key=c3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3M=,"
        "server_key=a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s=,iterations=4096"
    )
    document = json.loads(encode_entity_config({"SCRAM-SHA-256": text}))
    assert document == {"version": 1, "config": {"SCRAM-SHA-256": text}}


@given(st.text(min_size=1, max_size=40))
def test_any_user_name_is_one_path_element(user: str) -> None:
    element = user_config_path(user).removeprefix("/config/users/")
    assert "/" not in element
    assert desanitize(sanitize(user)) == user


@given(st.text(max_size=40))
def test_a_change_notification_names_the_entity(entity: str) -> None:
    data = encode_config_change(f"users/{entity}")
    assert json.loads(data)["version"] == 2
    assert decode_config_change("/config/changes/config_change_0000000001", data) == (
        f"users/{entity}"
    )


@pytest.mark.parametrize(
    "data",
    [b"not json", b"[]", b'{"version":1}', b'{"version":1,"config":[1]}'],
)
def test_a_malformed_entity_config_names_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZnode, match="/config/users/bad"):
        decode_entity_config("/config/users/bad", data)


@given(st.text(max_size=60))
def test_a_malformed_credential_is_malformed_znode_never_a_crash(text: str) -> None:
    try:
        scram_credentials_in("/config/users/u", {"SCRAM-SHA-512": text})
    except MalformedZnode as exc:
        assert "/config/users/u" in str(exc)


names = st.one_of(st.none(), st.text(min_size=1, max_size=20))


@given(
    st.one_of(
        st.tuples(names).map(lambda n: ((USER, n[0]),)),
        st.tuples(names).map(lambda n: ((CLIENT_ID, n[0]),)),
        st.tuples(names, names).map(lambda n: ((CLIENT_ID, n[1]), (USER, n[0]))),
        st.sampled_from(["10.0.0.1", "::1", None]).map(lambda ip: ((IP, ip),)),
    )
)
def test_every_quota_entity_has_its_path_under_config(
    entries: tuple[tuple[str, str | None], ...],
) -> None:
    entity = ClientQuotaEntity(entries)
    path = entity_path(entity)
    assert entity_of(path) == entity
    assert path.split("/")[0] == (
        "ips" if entity.is_ip else "users" if USER in entity.types else "clients"
    )


def test_quota_entities_are_where_kafka_configs_puts_them() -> None:
    user_client = ClientQuotaEntity(((CLIENT_ID, "app"), (USER, None)))
    assert entity_path(user_client) == "users/<default>/clients/app"
    assert entity_path(ClientQuotaEntity(((USER, "<default>"),))) == "users/%3Cdefault%3E"
    config = {
        "SCRAM-SHA-256": "salt=...",
        "producer_byte_rate": "1024",
        "request_percentage": "12.5",
    }
    assert quota_values_in("/config/users/a", config) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": 12.5,
    }
    assert encode_quota_value("producer_byte_rate", 1024.0) == "1024"
    with pytest.raises(MalformedZnode, match="/config/users/a"):
        quota_values_in("/config/users/a", {"consumer_byte_rate": "fast"})


@pytest.mark.parametrize("path", ["users", "topics/t", "users/a/clients", "users/a/ips/b/c/d"])
def test_a_path_of_no_quota_entity_is_malformed(path: str) -> None:
    with pytest.raises(MalformedZnode):
        entity_of(path)
