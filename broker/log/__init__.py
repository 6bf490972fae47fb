"""The broker's durable, segmented log (interface: docs/design/log-api.md).

Import names from the module that defines them (`broker.log.log_manager.LogManager`,
`broker.log.partition_log.PartitionLog`, ...): this file re-exports nothing, so that
importing one module of the package does not import all of them, and the package has
no import cycle through it.
"""
