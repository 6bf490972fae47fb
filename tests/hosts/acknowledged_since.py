"""Which partitions acknowledged a record sent after a moment: acks=all resumed there
(the fault tests' producers note when each value was sent and acknowledged)."""

from __future__ import annotations

from tests.hosts.host_processes import ProducerLoad


def partitions_acknowledged_since(load: ProducerLoad, moment: float) -> set[int]:
    return {
        acked.partition
        for history in load.histories
        for value, acked in list(history.acknowledged.items())
        if history.sent_at[value] > moment
    }
