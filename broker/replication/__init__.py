"""Replication as Kafka 2.x does it (issue 20).

The core is sans-IO: each of its modules holds one of Kafka's decisions as pure
functions or small state classes over values (the leader's view of its followers,
the leader-epoch cache and follower truncation, the follower's fetch state machine,
replica placement, the controller's elections); none does I/O or reads a clock.
A few Trio components run it, each over small Protocols for what it needs from the
log and the network: the replica fetcher (`replica_fetcher.py`, over `follower_log`
and `leader_fetch_session`), the leader's partition with its acks=all purgatory
(`partition_leader.py`, `delayed_produce.py`) and the controller's notifications
(`broker_notifier.py`; the controller itself is `broker/coordination/kafka_controller.py`).
See docs/replication.md.
"""
