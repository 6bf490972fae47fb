"""Spark Structured Streaming source and sink over the broker's Kafka API.

``trio-kafka`` is a PySpark Python data source with the options and columns of
Spark's Kafka connector; ``broker pipeline ...`` (``broker.pipeline.cli``)
runs the archive and aggregate jobs and users' job files. Importing this
package does not import Spark; ``broker.pipeline.data_source`` does.
"""

FORMAT_NAME = "trio-kafka"
