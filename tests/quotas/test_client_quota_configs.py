"""Quota configs, their validation as Kafka validates AlterClientQuotas, and the file."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode
from broker.quotas.client_quota_configs import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    ClientQuotaConfigs,
    FilterComponent,
    QuotaOp,
    validate_filter,
    validate_ops,
)
from broker.quotas.client_quota_entity import (
    ClientQuotaEntity,
    client_entity,
    ip_entity,
    user_client_entity,
    user_entity,
)
from broker.quotas.quota_store import QuotaStore, decode_quotas, encode_quotas


@pytest.mark.parametrize(
    "pairs",
    [
        [],
        [("group", "g")],
        [("user", "a"), ("user", "b")],
        [("ip", "10.0.0.1"), ("user", "a")],
        [("ip", "not-an-ip")],
    ],
)
def test_invalid_entities_are_invalid_requests(pairs: list[tuple[str, str | None]]) -> None:
    with pytest.raises(KafkaError) as caught:
        ClientQuotaEntity.of(pairs)
    assert caught.value.error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("entity", "op"),
    [
        (user_entity("a"), QuotaOp("connection_creation_rate", 1)),
        (ip_entity(None), QuotaOp("producer_byte_rate", 1)),
        (user_entity("a"), QuotaOp("producer_byte_rate", 1.5)),
        (user_entity("a"), QuotaOp("producer_byte_rate", -1)),
        (user_entity("a"), QuotaOp("request_percentage", float("nan"))),
        (user_entity("a"), QuotaOp("no_such_quota", 1)),
    ],
)
def test_invalid_quota_ops_are_invalid_requests(entity: ClientQuotaEntity, op: QuotaOp) -> None:
    with pytest.raises(KafkaError) as caught:
        validate_ops(entity, [op])
    assert caught.value.error_code == ErrorCode.INVALID_REQUEST


def test_fractional_request_percentage_is_accepted() -> None:
    assert validate_ops(client_entity(None), [QuotaOp("request_percentage", 12.5)])


def test_ip_filters_cannot_be_mixed_with_user_or_client_filters() -> None:
    with pytest.raises(KafkaError):
        validate_filter([FilterComponent("ip", MATCH_DEFAULT), FilterComponent("user", 1)])


CONFIGS = ClientQuotaConfigs(
    {
        user_entity("alice"): {"producer_byte_rate": 1.0},
        user_entity(None): {"producer_byte_rate": 2.0},
        user_client_entity("alice", "app"): {"consumer_byte_rate": 3.0},
        client_entity("app"): {"request_percentage": 4.0},
        ip_entity("10.0.0.1"): {"connection_creation_rate": 5.0},
    }
)


def described(components: list[FilterComponent], strict: bool) -> set[ClientQuotaEntity]:
    return {entity for entity, _ in CONFIGS.describe(components, strict)}


def test_describe_matches_exact_default_and_specified_names() -> None:
    exact = [FilterComponent("user", MATCH_EXACT, "alice")]
    assert described(exact, strict=True) == {user_entity("alice")}
    assert described(exact, strict=False) == {
        user_entity("alice"),
        user_client_entity("alice", "app"),
    }
    default = [FilterComponent("user", MATCH_DEFAULT)]
    assert described(default, strict=True) == {user_entity(None)}
    specified = [FilterComponent("user", MATCH_SPECIFIED)]
    assert described(specified, strict=True) == {user_entity("alice")}
    assert described([], strict=False) == {entity for entity, _ in CONFIGS}


names = st.one_of(st.none(), st.text(min_size=1, max_size=8))
entities = st.one_of(
    st.builds(user_entity, names),
    st.builds(client_entity, names),
    st.builds(user_client_entity, names, names),
    st.builds(ip_entity, st.sampled_from([None, "10.0.0.1", "::1"])),
)
values = st.dictionaries(
    st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage"]),
    st.floats(1, 1e12),
    min_size=1,
)


@given(st.dictionaries(entities, values, max_size=6))
def test_stored_quotas_read_back_as_written(
    quotas: dict[ClientQuotaEntity, dict[str, float]],
) -> None:
    assert decode_quotas(encode_quotas(quotas.items())) == quotas


def test_the_store_is_a_file_in_the_log_dir_and_missing_means_none(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    assert store.load() == {}
    store.save_sync([(user_entity("a"), {"producer_byte_rate": 10.0})])
    assert QuotaStore(tmp_path).load() == {user_entity("a"): {"producer_byte_rate": 10.0}}
    store.path.write_text("{}")
    with pytest.raises(ValueError):
        store.load()


def test_a_change_is_applied_to_the_stored_quotas_not_to_a_stale_copy(tmp_path: Path) -> None:
    first, second = QuotaStore(tmp_path), QuotaStore(tmp_path)
    first.update_sync({user_entity("a"): [QuotaOp("producer_byte_rate", 10.0)]})
    stored = second.update_sync(
        {
            user_entity("a"): [QuotaOp("consumer_byte_rate", 20.0)],
            user_entity("b"): [QuotaOp("producer_byte_rate", 30.0)],
        }
    )
    assert stored == {
        user_entity("a"): {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0},
        user_entity("b"): {"producer_byte_rate": 30.0},
    }
    assert first.update_sync(
        {user_entity("b"): [QuotaOp("producer_byte_rate", 0, remove=True)]}
    ) == {user_entity("a"): {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}}
    assert QuotaStore(tmp_path).load() == {
        user_entity("a"): {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}
    }


def test_concurrent_changes_through_separate_stores_all_last(tmp_path: Path) -> None:
    """Each thread holds its own store, as each process of a cluster does; the file lock
    makes their read-modify-write changes one at a time."""
    writers, changes_each = 4, 10

    def write(writer: int) -> None:
        store = QuotaStore(tmp_path)
        for n in range(changes_each):
            store.update_sync(
                {user_entity(f"w{writer}-{n}"): [QuotaOp("producer_byte_rate", n + 1)]}
            )

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert QuotaStore(tmp_path).load() == {
        user_entity(f"w{w}-{n}"): {"producer_byte_rate": float(n + 1)}
        for w in range(writers)
        for n in range(changes_each)
    }
