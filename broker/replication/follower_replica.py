"""What a leader knows of one follower (Kafka's Replica on the leader).

The follower's log end is the offset of its latest Fetch. "Caught up" is judged
as Kafka 2.x judges it: a fetch reaching the leader's log end at that moment
proves the follower caught up now; a fetch reaching the leader's log end as it
was at the previous fetch proves it was caught up at the previous fetch. A busy
leader therefore does not push out a follower that keeps fetching everything it
is offered, while one that stops fetching falls behind by time alone.
"""

from __future__ import annotations

import math

import attrs

UNKNOWN_OFFSET = -1
NEVER = -math.inf


@attrs.frozen
class FollowerReplica:
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time: float = NEVER
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time: float = NEVER

    @classmethod
    def at_leadership_start(cls, broker_id: int, *, in_isr: bool, now: float) -> FollowerReplica:
        """A new leader gives its ISR a full lag period to show up (Kafka's reset of
        lastCaughtUpTimeMs), and nothing to a replica outside it."""
        return cls(broker_id, last_caught_up_time=now if in_isr else NEVER)

    def after_fetch(
        self, fetch_offset: int, leader_log_end_offset: int, now: float
    ) -> FollowerReplica:
        caught_up = self.last_caught_up_time
        if fetch_offset >= leader_log_end_offset:
            caught_up = max(caught_up, now)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            caught_up = max(caught_up, self.last_fetch_time)
        return FollowerReplica(
            self.broker_id,
            log_end_offset=fetch_offset,
            last_caught_up_time=caught_up,
            last_fetch_leader_log_end_offset=leader_log_end_offset,
            last_fetch_time=now,
        )

    def lag_s(self, now: float) -> float:
        return now - self.last_caught_up_time
