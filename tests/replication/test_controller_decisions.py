"""The controller's elections on broker failure, controlled shutdown and rebalance."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.replication.controller_decisions import (
    LeaderAndIsrUpdate,
    PartitionState,
    imbalanced_partitions,
    on_broker_failure,
    on_controlled_shutdown,
    preferred_replica_election,
)
from broker.replication.leader_and_isr import NO_LEADER, LeaderAndIsr
from broker.replication.leader_election import (
    Election,
    offline_partition_leader_election,
)
from broker.replication.topic_partition import TopicPartition


def partition(
    n: int, replicas: tuple[int, ...], leader: int, isr: tuple[int, ...], epoch: int = 4
) -> PartitionState:
    return PartitionState(
        TopicPartition("t", n), replicas, LeaderAndIsr(leader, epoch, isr, zk_version=9)
    )


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_with_a_new_epoch() -> None:
    updates = on_broker_failure([partition(0, (1, 2, 3), 1, (1, 3, 2))], live={2, 3})
    assert updates == [
        LeaderAndIsrUpdate(TopicPartition("t", 0), LeaderAndIsr(2, 5, (3, 2), zk_version=9))
    ]


def test_dead_followers_leave_the_isr_of_partitions_whose_leader_lives() -> None:
    updates = on_broker_failure([partition(0, (1, 2, 3), 1, (1, 2, 3))], live={1, 3})
    assert [u.leader_and_isr for u in updates] == [LeaderAndIsr(1, 5, (1, 3), 9)]
    assert on_broker_failure([partition(0, (1, 2), 1, (1, 2))], live={1, 2}) == []


def test_without_a_live_isr_member_the_partition_goes_offline_keeping_its_isr() -> None:
    updates = on_broker_failure([partition(0, (1, 2, 3), 1, (1,))], live={2, 3})
    assert [u.leader_and_isr for u in updates] == [LeaderAndIsr(NO_LEADER, 5, (1,), 9)]
    # Still offline and nothing to change: no write at all.
    offline = partition(0, (1, 2, 3), NO_LEADER, (1,))
    assert on_broker_failure([offline], live={2, 3}) == []
    # The ISR member returns: it leads again, cleanly.
    back = on_broker_failure([offline], live={1, 2, 3})
    assert [u.leader_and_isr for u in back] == [LeaderAndIsr(1, 5, (1,), 9)]


def test_unclean_election_only_where_the_topic_allows_it() -> None:
    updates = on_broker_failure(
        [partition(0, (1, 2, 3), 1, (1,))],
        live={2, 3},
        unclean_leader_election_enable=lambda t: True,
    )
    assert updates == [
        LeaderAndIsrUpdate(TopicPartition("t", 0), LeaderAndIsr(2, 5, (2,), 9), unclean=True)
    ]


def test_controlled_shutdown_moves_leadership_and_leaves_the_isr() -> None:
    decision = on_controlled_shutdown(
        [
            partition(0, (1, 2, 3), 1, (1, 2, 3)),  # led by the leaving broker
            partition(1, (2, 1, 3), 2, (2, 1, 3)),  # followed by it
            partition(2, (1, 2), 1, (1,)),  # nobody else in sync: remains
            partition(3, (1,), 1, (1,)),  # a single replica: goes offline with it
        ],
        live={1, 2, 3},
        shutting_down={1},
    )
    assert [(u.topic_partition.partition, u.leader_and_isr) for u in decision.updates] == [
        (0, LeaderAndIsr(2, 5, (2, 3), 9)),
        (1, LeaderAndIsr(2, 5, (2, 3), 9)),
    ]
    assert decision.partitions_remaining == [TopicPartition("t", 2)]


def test_preferred_leaders_lead_again_when_in_sync() -> None:
    states = [
        partition(0, (1, 2), 2, (2, 1)),
        partition(1, (1, 2), 2, (2,)),  # preferred not in sync: stays
        partition(2, (1, 2), 1, (1, 2)),  # already leads
    ]
    updates = preferred_replica_election(states, live={1, 2})
    assert [u.leader_and_isr for u in updates] == [LeaderAndIsr(1, 5, (2, 1), 9)]


def test_auto_rebalance_acts_above_the_imbalance_percentage() -> None:
    # Broker 1 should lead 10 partitions and leads 9: 10% is not above 10%.
    states = [partition(n, (1, 2), 1, (1, 2)) for n in range(9)]
    states.append(partition(9, (1, 2), 2, (2, 1)))
    assert imbalanced_partitions(states, {1, 2}, set(), 10) == []
    assert imbalanced_partitions(states, {1, 2}, set(), 5) == [states[9]]
    assert imbalanced_partitions(states, {1, 2}, {1}, 5) == []  # not onto a leaving broker


BROKERS = [1, 2, 3, 4, 5]


@st.composite
def partition_states(draw: st.DrawFn) -> list[PartitionState]:
    states = []
    for n in range(draw(st.integers(1, 8))):
        replicas = tuple(draw(st.permutations(BROKERS))[: draw(st.integers(1, 4))])
        isr = tuple(b for b in replicas if draw(st.booleans())) or replicas[:1]
        leader = draw(st.sampled_from([*isr, NO_LEADER]))
        states.append(partition(n, replicas, leader, isr, epoch=draw(st.integers(0, 9))))
    return states


@given(partition_states(), st.sets(st.sampled_from(BROKERS)), st.booleans())
def test_every_failure_elects_from_the_live_isr_unless_unclean(
    states: list[PartitionState], live: set[int], unclean: bool
) -> None:
    before = {s.topic_partition: s for s in states}
    updates = on_broker_failure(states, live, lambda _topic: unclean)
    assert len({u.topic_partition for u in updates}) == len(updates)
    for update in updates:
        old = before[update.topic_partition]
        new = update.leader_and_isr
        assert new.leader_epoch == old.leader_and_isr.leader_epoch + 1
        assert new.zk_version == old.leader_and_isr.zk_version  # the version to write at
        if new.leader == NO_LEADER:
            assert not any(b in live for b in old.leader_and_isr.isr)
            assert new.isr == old.leader_and_isr.isr
            continue
        assert new.leader in live and new.leader in old.replicas
        assert new.leader in new.isr and set(new.isr) <= live
        if update.unclean:
            assert unclean and not any(b in live for b in old.leader_and_isr.isr)
            assert new.isr == (new.leader,)
        else:
            assert set(new.isr) <= set(old.leader_and_isr.isr)
    for state in states:  # afterwards no partition is led by a dead broker
        updated = {u.topic_partition: u.leader_and_isr for u in updates}
        leader = updated.get(state.topic_partition, state.leader_and_isr).leader
        assert leader == NO_LEADER or leader in live


@given(partition_states(), st.sets(st.sampled_from(BROKERS), min_size=1))
def test_a_controlled_shutdown_never_hands_leadership_to_a_leaving_broker(
    states: list[PartitionState], leaving: set[int]
) -> None:
    live = set(BROKERS)
    decision = on_controlled_shutdown(states, live, leaving)
    for update in decision.updates:
        assert update.leader_and_isr.leader not in leaving
        assert not set(update.leader_and_isr.isr) & leaving
        assert update.leader_and_isr.leader in update.leader_and_isr.isr
    for tp in decision.partitions_remaining:
        state = next(s for s in states if s.topic_partition == tp)
        assert set(state.leader_and_isr.isr) <= leaving


@given(partition_states(), st.sets(st.sampled_from(BROKERS)))
def test_preferred_election_only_picks_the_live_in_sync_first_replica(
    states: list[PartitionState], live: set[int]
) -> None:
    for update in preferred_replica_election(states, live):
        state = next(s for s in states if s.topic_partition == update.topic_partition)
        assert update.leader_and_isr.leader == state.replicas[0]
        assert update.leader_and_isr.leader in live
        assert update.leader_and_isr.isr == state.leader_and_isr.isr


def test_an_offline_election_walks_the_assignment_in_order() -> None:
    assert offline_partition_leader_election((3, 1, 2), (1, 2), {1, 2}) == Election(1, (1, 2))
    assert offline_partition_leader_election((3, 1, 2), (3,), {1, 2}) is None
