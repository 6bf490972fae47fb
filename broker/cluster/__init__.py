"""A cluster of broker processes on one machine (docs/cluster.md).

A supervisor starts `process.count` broker processes; each is a whole broker
with its own node id and listener ports. They share one metadata store (topics,
partition leaders, brokers, producer-id blocks) and the log dirs, where each
process opens only the partitions it leads.
"""
