"""The Python data source registered with Spark as ``trio-kafka``."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from broker.pipeline.arrow_records import spark_schema
from broker.pipeline.options import FORMAT_NAME, SinkOptions, SourceOptions
from broker.pipeline.sink import KafkaBatchWriter, KafkaStreamWriter, check_schema
from broker.pipeline.source import KafkaBatchReader, KafkaStreamReader


class TrioKafkaDataSource(DataSource):
    """Reads and writes topics through the broker's Kafka API (Spark's Kafka options).

    ``__init__`` stays cheap (Spark creates instances several times); options are
    parsed where they are used, so a write does not need ``subscribe``.
    """

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return spark_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = SinkOptions.parse(self.options)
        check_schema(schema, options)
        return KafkaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = SinkOptions.parse(self.options)
        check_schema(schema, options)
        return KafkaStreamWriter(options)
