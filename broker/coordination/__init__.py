"""Brokers on several hosts forming one cluster through a coordination engine.

`store.py` is the seam (`CoordinationStore`): what membership, controller
election and, later, replication need from a coordination engine, with no
engine's types in it. `kazoo_store.py` is the ZooKeeper engine. Above the seam,
Kafka 2.x's znode layout: `broker_registration.py` (`/brokers/ids/<id>`),
`controller_election.py` (`/controller`, `/controller_epoch`),
`live_brokers.py` (the registered brokers, followed through watches),
`membership.py` (the Service a broker runs when `zookeeper.connect` is set),
partition state (`partition_state_*.py`) and the controller task
(`kafka_controller.py`).
See docs/replication.md.
"""
