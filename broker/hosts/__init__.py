"""Brokers on several hosts coordinated through ZooKeeper (issue 20, docs/replication.md):
the third `Deployment` / `Topology` pair, chosen by the composition root
(`broker/__main__.py`) when `zookeeper.connect` is set. Nothing below the composition
root imports this package."""
