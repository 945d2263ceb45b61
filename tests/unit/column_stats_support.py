"""What the column-stats tests share (``test_mdt_column_stats*.py``): the Avro namespace of Hudi's
models and a round trip through a ``HoodieMetadataRecord``.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import fastavro

from hoodie.metadata.records import metadata_schema

NS = "org.apache.hudi.avro.model."


def round_trip(stats: dict[str, Any], table_version: int) -> dict[str, Any]:
    """``stats`` written inside a HoodieMetadataRecord of ``table_version`` and read back."""
    schema = fastavro.parse_schema(copy.deepcopy(metadata_schema(table_version)))
    buf = io.BytesIO()
    record = {"key": "", "type": 3, "filesystemMetadata": None, "ColumnStatsMetadata": stats}
    fastavro.schemaless_writer(buf, schema, record)
    back = fastavro.schemaless_reader(
        io.BytesIO(buf.getvalue()), schema, schema, return_record_name=True, return_record_name_override=True
    )
    assert isinstance(back, dict)
    result: dict[str, Any] = back["ColumnStatsMetadata"]
    return result
