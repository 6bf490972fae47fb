"""A partition's leadership as the controller records it (Kafka's LeaderAndIsr).

It is what `/brokers/topics/<t>/partitions/<p>/state` holds, with the znode
version a conditional write must name: two writers (the leader shrinking its
ISR, the controller electing) can only both succeed one after the other.
"""

from __future__ import annotations

import attrs

NO_LEADER = -1
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0


@attrs.frozen
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = INITIAL_ZK_VERSION

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        """A controller's change: a new epoch, so every replica can tell the old
        leader's requests from the new one's (Kafka bumps it on every controller write)."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, isr, self.zk_version)

    def with_isr(self, isr: tuple[int, ...]) -> LeaderAndIsr:
        """A leader's own ISR change keeps its epoch: the leader did not change."""
        return LeaderAndIsr(self.leader, self.leader_epoch, isr, self.zk_version)
