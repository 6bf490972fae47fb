"""The KIP-848 consumer group state machine, without a network.

A small client model heartbeats as librdkafka does: it sends its epoch and what it
owns, and applies the assignment it is given (revoking at once). Hypothesis drives
random joins, heartbeats, lost responses, leaves, subscription and topic changes and
timeouts; the invariants hold after every step, and once the members heartbeat
undisturbed the group becomes Stable with every subscribed partition assigned.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import hypothesis.strategies as st
from hypothesis import given, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatParams,
    HeartbeatResult,
)
from broker.coordinator.consumer_group_assignors import uniform_assign
from broker.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator
from broker.coordinator.consumer_group_member import MemberState, TopicPartitionSet
from broker.protocol.error_codes import ErrorCode

CONFIG = ConsumerGroupConfig(session_timeout_ms=1000, heartbeat_interval_ms=100)
TOPICS = {"a": 3, "b": 2, "other": 4}


@attrs.define
class Client:
    member_id: str
    topics: tuple[str, ...] | None = ("a", "b")
    regex: str | None = None
    instance_id: str | None = None
    epoch: int = 0
    owned: TopicPartitionSet = frozenset()

    def params(self, *, full: bool = False) -> HeartbeatParams:
        joining = self.epoch == 0
        return HeartbeatParams(
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=5000 if joining or full else -1,
            subscribed_topic_names=self.topics if joining or full else None,
            subscribed_topic_regex=self.regex if joining or full else None,
            owned=self.owned,
        )

    def apply(self, result: HeartbeatResult) -> None:
        if result.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.epoch, self.owned = 0, frozenset()  # lose everything and rejoin
            return
        assert result.error is ErrorCode.NONE, result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = result.assignment


def beat(
    group: ConsumerGroup,
    client: Client,
    now: float = 0.0,
    topics: Mapping[str, int] = TOPICS,
    *,
    full: bool = False,
) -> HeartbeatResult:
    result = group.heartbeat(client.params(full=full), now, topics)
    client.apply(result)
    return result


def settle(
    group: ConsumerGroup,
    clients: list[Client],
    now: float = 0.0,
    topics: Mapping[str, int] = TOPICS,
) -> None:
    for _ in range(10):
        for client in clients:
            beat(group, client, now, topics, full=True)


def partitions(*spec: str) -> TopicPartitionSet:
    return frozenset((s[0 : s.index("-")], int(s[s.index("-") + 1 :])) for s in spec)


def test_a_lone_member_gets_every_subscribed_partition_at_the_first_epoch() -> None:
    group, client = ConsumerGroup("g", CONFIG), Client("m1")
    result = beat(group, client)
    assert result.member_epoch == group.group_epoch == group.assignment_epoch == 1
    assert result.heartbeat_interval_ms == 100
    assert client.owned == partitions("a-0", "a-1", "a-2", "b-0", "b-1")
    assert group.state == "Stable"


def test_a_partition_moves_only_after_its_previous_owner_revoked_it() -> None:
    group, first, second = ConsumerGroup("g", CONFIG), Client("m1"), Client("m2")
    beat(group, first)
    beat(group, second)
    # The newcomer is at the new epoch but waits for what the first member still owns.
    assert second.epoch == group.assignment_epoch == 2
    assert second.owned == frozenset()
    assert group.members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    assert group.state == "Reconciling"
    # The first member is told to give up partitions; its epoch stays until it does.
    revoke = beat(group, first)
    assert revoke.member_epoch == 1
    assert first.owned < partitions("a-0", "a-1", "a-2", "b-0", "b-1")
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # The acknowledgement (owned without them) frees them, then the newcomer gets them.
    beat(group, first)
    assert first.epoch == 2
    beat(group, second)
    assert second.owned and not second.owned & first.owned
    assert second.owned | first.owned == partitions("a-0", "a-1", "a-2", "b-0", "b-1")
    assert group.state == "Stable"


def test_a_member_that_does_not_acknowledge_keeps_its_partitions_from_the_others() -> None:
    group, first, second = ConsumerGroup("g", CONFIG), Client("m1"), Client("m2")
    beat(group, first)
    beat(group, second)
    beat(group, first)  # revocation asked; this client "forgets" to apply it
    stubborn = attrs.evolve(first, owned=partitions("a-0", "a-1", "a-2", "b-0", "b-1"))
    for _ in range(3):
        group.heartbeat(stubborn.params(), 0.0, TOPICS)
        beat(group, second)
    assert second.owned == frozenset()
    # Its rebalance timeout fences it; then the newcomer gets everything.
    assert group.on_timeout(10_000.0) == ["m1", "m2"]  # the newcomer's session ended too


def test_leaving_members_partitions_go_to_the_others() -> None:
    group, first, second = ConsumerGroup("g", CONFIG), Client("m1"), Client("m2")
    beat(group, first)
    beat(group, second)
    settle(group, [first, second])
    epoch = group.group_epoch
    left = group.heartbeat(HeartbeatParams("m2", -1), 0.0, TOPICS)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    assert group.group_epoch > epoch
    settle(group, [first])
    assert first.owned == partitions("a-0", "a-1", "a-2", "b-0", "b-1")


def test_a_member_silent_for_its_session_timeout_is_fenced() -> None:
    group, first, second = ConsumerGroup("g", CONFIG), Client("m1"), Client("m2")
    beat(group, first, now=0.0)
    beat(group, second, now=0.0)
    settle(group, [first, second], now=500.0)
    beat(group, first, now=1200.0)
    assert group.on_timeout(1600.0) == ["m2"]
    settle(group, [first], now=1700.0)
    assert first.owned == partitions("a-0", "a-1", "a-2", "b-0", "b-1")
    assert beat(group, second, now=1700.0).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_epochs_from_the_future_or_the_distant_past_are_fenced() -> None:
    group, client = ConsumerGroup("g", CONFIG), Client("m1")
    beat(group, client)
    ahead = group.heartbeat(HeartbeatParams("m1", 7, owned=frozenset()), 0.0, TOPICS)
    assert ahead.error is ErrorCode.FENCED_MEMBER_EPOCH
    beat(group, Client("m2"))
    beat(group, client)
    beat(group, client)
    assert client.epoch == 2
    # The previous epoch is accepted from a member that lost a response...
    lost = group.heartbeat(HeartbeatParams("m1", 1, owned=frozenset()), 0.0, TOPICS)
    assert lost.error is ErrorCode.NONE
    # ...but not without saying what it owns.
    assert group.heartbeat(HeartbeatParams("m1", 1), 0.0, TOPICS).error is (
        ErrorCode.FENCED_MEMBER_EPOCH
    )


def test_a_static_member_returning_under_a_new_id_keeps_its_assignment_and_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    first, other = Client("m1", instance_id="i1"), Client("m2")
    beat(group, first)
    beat(group, other)
    settle(group, [first, other])
    epoch, owned = group.group_epoch, first.owned
    left = group.heartbeat(HeartbeatParams("m1", -2, instance_id="i1"), 0.0, TOPICS)
    assert left.member_epoch == -2
    duplicate = group.heartbeat(Client("m3", instance_id="i2").params(), 0.0, TOPICS)
    assert duplicate.error is ErrorCode.NONE
    group.heartbeat(HeartbeatParams("m3", -1), 0.0, TOPICS)
    epoch = group.group_epoch
    back = Client("m9", instance_id="i1")
    result = beat(group, back)
    assert result.error is ErrorCode.NONE
    assert group.group_epoch == epoch
    assert back.owned == owned
    assert "m1" not in group.members
    taken = group.heartbeat(Client("m10", instance_id="i1").params(), 0.0, TOPICS)
    assert taken.error is ErrorCode.UNRELEASED_INSTANCE_ID


def test_a_regex_subscription_follows_the_topics_that_match() -> None:
    group, client = ConsumerGroup("g", CONFIG), Client("m1", topics=None, regex="a|b")
    beat(group, client, topics={"a": 1, "other": 2})
    assert client.owned == partitions("a-0")
    epoch = group.group_epoch
    beat(group, client, topics={"a": 1, "b": 2, "other": 2})
    assert group.group_epoch == epoch + 1
    assert client.owned == partitions("a-0", "b-0", "b-1")
    bad = group.heartbeat(Client("m2", regex="(").params(), 0.0, TOPICS)
    assert bad.error is ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_topic_growing_partitions_bumps_the_group_epoch() -> None:
    group, client = ConsumerGroup("g", CONFIG), Client("m1", topics=("a",))
    beat(group, client)
    beat(group, client, topics={**TOPICS, "a": 5})
    assert group.group_epoch == 2
    assert client.owned == frozenset(("a", p) for p in range(5))


def test_the_range_assignor_is_chosen_by_the_members_and_gives_ranges() -> None:
    group = ConsumerGroup("g", CONFIG)
    clients = [Client(f"m{i}", topics=("other",)) for i in range(2)]
    for client in clients:
        params = attrs.evolve(client.params(), server_assignor="range")
        client.apply(group.heartbeat(params, 0.0, TOPICS))
    settle(group, clients)
    assert group.assignor_name == "range"
    assert clients[0].owned == partitions("other-0", "other-1")
    assert clients[1].owned == partitions("other-2", "other-3")


def test_offset_commits_check_the_member_and_its_epoch() -> None:
    group, client = ConsumerGroup("g", CONFIG), Client("m1")
    beat(group, client)
    assert group.validate_offset_commit("m1", 1, 9, False) is ErrorCode.NONE
    assert group.validate_offset_commit("m1", 5, 9, False) is ErrorCode.STALE_MEMBER_EPOCH
    assert group.validate_offset_commit("nobody", 1, 9, False) is ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_offset_commit("m1", 1, 8, False) is ErrorCode.UNSUPPORTED_VERSION
    assert group.validate_offset_commit("m1", 1, 8, True) is ErrorCode.NONE
    assert group.validate_offset_commit("", -1, 9, False) is ErrorCode.UNKNOWN_MEMBER_ID


def test_an_offset_commit_must_name_the_members_current_epoch_not_its_previous_one() -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit compares the epoch exactly: a commit
    sent before the member's epoch moved is refused and the client retries it."""
    group, first, second = ConsumerGroup("g", CONFIG), Client("m1"), Client("m2")
    beat(group, first)
    beat(group, second)
    settle(group, [first, second])
    member = group.members["m1"]
    assert member.member_epoch == 2 and member.previous_member_epoch == 1
    assert group.validate_offset_commit("m1", 2, 9, False) is ErrorCode.NONE
    assert group.validate_offset_commit("m1", 1, 9, False) is ErrorCode.STALE_MEMBER_EPOCH
    # TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION.
    assert group.validate_offset_commit("m1", 1, 3, True) is ErrorCode.ILLEGAL_GENERATION
    assert group.validate_offset_commit("m1", 2, 3, True) is ErrorCode.NONE


def test_a_transactional_commit_naming_no_member_is_accepted_by_a_live_group() -> None:
    """TxnOffsetCommit v0-v2 (aiokafka's) carries no member id or epoch: Kafka checks a
    transactional commit against the member only when the request names one."""
    group, client = ConsumerGroup("g", CONFIG), Client("m1")
    beat(group, client)
    assert group.validate_offset_commit("", -1, 0, True) is ErrorCode.NONE
    assert group.validate_offset_commit("nobody", 1, 3, True) is ErrorCode.UNKNOWN_MEMBER_ID


class ConsumerGroupMachine(RuleBasedStateMachine):
    """Random heartbeats, joins, leaves, lost responses and timeouts."""

    def __init__(self) -> None:
        super().__init__()
        self.group = ConsumerGroup("g", CONFIG)
        self.clients: dict[str, Client] = {}
        self.topics = dict(TOPICS)
        self.now = 0.0
        self.next_id = 0
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.member_epochs: dict[str, int] = {}

    @rule(topics=st.sampled_from([("a",), ("b",), ("a", "b"), ("other",), ("a", "other")]))
    def join(self, topics: tuple[str, ...]) -> None:
        self.next_id += 1
        client = Client(f"m{self.next_id}", topics=topics)
        self.clients[client.member_id] = client
        beat(self.group, client, self.now, self.topics)

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data(), lose_response=st.booleans())
    def heartbeat(self, data: st.DataObject, lose_response: bool) -> None:
        client = self.clients[data.draw(st.sampled_from(sorted(self.clients)))]
        result = self.group.heartbeat(client.params(), self.now, self.topics)
        if not lose_response:
            client.apply(result)

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        member_id = data.draw(st.sampled_from(sorted(self.clients)))
        self.group.heartbeat(HeartbeatParams(member_id, -1), self.now, self.topics)
        del self.clients[member_id]
        self.member_epochs.pop(member_id, None)

    @precondition(lambda self: bool(self.clients))
    @rule(data=st.data(), topics=st.sampled_from([("a",), ("b", "other"), ("a", "b")]))
    def resubscribe(self, data: st.DataObject, topics: tuple[str, ...]) -> None:
        client = self.clients[data.draw(st.sampled_from(sorted(self.clients)))]
        client.topics = topics
        beat(self.group, client, self.now, self.topics, full=True)

    @rule(topic=st.sampled_from(sorted(TOPICS)))
    def add_partition(self, topic: str) -> None:
        self.topics[topic] += 1

    @rule(ms=st.sampled_from([100.0, 600.0, 1500.0]))
    def time_passes(self, ms: float) -> None:
        self.now += ms
        for member_id in self.group.on_timeout(self.now):
            self.member_epochs.pop(member_id, None)

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        seen: set[tuple[str, int]] = set()
        for member in self.group.members.values():
            assert not member.owned & seen, (member, seen)
            seen |= member.owned
            for tp in member.owned:
                assert self.group.owners[tp] == member.member_id
        assert set(self.group.owners) == seen

    @invariant()
    def epochs_never_go_back(self) -> None:
        assert self.group.group_epoch >= self.group_epoch
        assert self.group.assignment_epoch >= self.assignment_epoch
        assert self.group.assignment_epoch <= self.group.group_epoch
        self.group_epoch = self.group.group_epoch
        self.assignment_epoch = self.group.assignment_epoch
        for member_id, member in self.group.members.items():
            assert member.member_epoch >= self.member_epochs.get(member_id, 0)
            assert member.member_epoch <= self.group.assignment_epoch
            self.member_epochs[member_id] = member.member_epoch

    def teardown(self) -> None:
        """Undisturbed, every member converges and every subscribed partition is owned."""
        clients = [c for c in self.clients.values() if c.member_id in self.group.members]
        for client in self.clients.values():
            if client.member_id not in self.group.members:
                client.epoch, client.owned = 0, frozenset()
                clients.append(client)
        settle(self.group, clients, self.now, self.topics)
        self.no_partition_has_two_owners()
        if not clients:
            return
        assert self.group.state == "Stable"
        subscribed = {t for c in clients for t in c.topics or ()}
        expected = {(t, p) for t in subscribed for p in range(self.topics[t])}
        assert set().union(*(c.owned for c in clients)) == expected
        for client in clients:
            assert client.owned == self.group.members[client.member_id].assigned


TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
TestConsumerGroupMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_the_uniform_assignor_balances_identical_subscriptions_and_keeps_partitions() -> None:
    counts = {"t": 7, "u": 3}
    subscriptions = dict.fromkeys(("m1", "m2", "m3"), frozenset(counts))
    first = uniform_assign(subscriptions, counts, {})
    sizes = sorted(sum(len(p) for p in a.values()) for a in first.values())
    assert sizes == [3, 3, 4]
    grown = {**subscriptions, "m4": frozenset(counts)}
    second = uniform_assign(grown, counts, first)
    assert sorted(sum(len(p) for p in a.values()) for a in second.values()) == [2, 2, 3, 3]
    for member in ("m1", "m2", "m3"):  # the old members only gave partitions away
        for topic, parts in second[member].items():
            assert parts <= first[member][topic]


def test_the_uniform_assignor_gives_each_topic_only_to_its_subscribers() -> None:
    counts = {"t": 4, "u": 4}
    subscriptions = {"m1": frozenset({"t"}), "m2": frozenset({"t", "u"})}
    result = uniform_assign(subscriptions, counts, {})
    assert "u" not in result["m1"]
    assert result["m2"]["u"] == frozenset(range(4))
    assert sum(len(p) for p in result["m1"].values()) == 4


@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["", "g", "h"]),
            st.builds(
                HeartbeatParams,
                member_id=st.sampled_from(["", "m1", "m2", "x" * 300]),
                member_epoch=st.integers(-5, 5) | st.integers(-(2**31), 2**31 - 1),
                instance_id=st.none() | st.sampled_from(["", "i1"]),
                rack_id=st.none() | st.sampled_from(["", "r"]),
                rebalance_timeout_ms=st.integers(-2, 10**6),
                subscribed_topic_names=st.none() | st.tuples(st.sampled_from(["a", "b", "", "zz"])),
                subscribed_topic_regex=st.none() | st.sampled_from(["", "a.*", "(", "[b-", "\\"]),
                server_assignor=st.none() | st.sampled_from(["uniform", "range", "", "x"]),
                owned=st.none()
                | st.frozensets(st.tuples(st.sampled_from(["a", "b", "q"]), st.integers(-1, 9))),
            ),
            st.integers(0, 1),
            st.floats(0, 10**7),
        ),
        max_size=12,
    )
)
def test_any_heartbeat_gets_an_error_code_and_never_breaks_the_group(
    calls: list[tuple[str, HeartbeatParams, int, float]],
) -> None:
    coordinator = ConsumerGroupCoordinator(CONFIG)
    now = 0.0
    for group_id, params, version, step in calls:
        now += step
        coordinator.fire_timers(now)
        result = coordinator.heartbeat(group_id, params, version, now, TOPICS)
        assert isinstance(result.error, ErrorCode)
        assert result.error is ErrorCode.NONE or result.message
    for group in coordinator.groups.values():
        seen: set[tuple[str, int]] = set()
        for member in group.members.values():
            assert not member.owned & seen
            seen |= member.owned
