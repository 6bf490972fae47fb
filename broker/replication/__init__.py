"""Replication as Kafka 2.x does it, as sans-IO pieces (issue 20).

Each module holds one of Kafka's decisions as pure functions or small state
classes over values: the leader's view of its followers (ISR, high watermark,
acks=all), the leader-epoch cache and follower truncation, the follower's fetch
state machine, replica placement and the controller's elections. None of them
does I/O or reads a clock: the broker's Trio tasks pass time and results in and
carry the returned actions out (see docs/replication.md).
"""
