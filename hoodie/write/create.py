"""Creating a table: ``hoodie.properties`` and the folders Hudi expects, for table versions 6, 8, 9."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hoodie.config.table_config import (
    METAFOLDER,
    RecordMergeMode,
    TableConfig,
    TableType,
    TableVersion,
    create_table_properties,
)
from hoodie.errors import InvalidInputError, SchemaError
from hoodie.io.fileio import FileIO, join
from hoodie.keygen import KeyGeneratorType, key_generator_properties
from hoodie.merge.config import merge_properties_for_new_table
from hoodie.schema.avro_arrow import NullOrder, arrow_to_avro_schema, avro_to_arrow_schema
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS
from hoodie.table import HoodieTable
from hoodie.timeline.instant_time import format_instant_time
from hoodie.timeline.layout import TablePaths


def table_avro_schema(
    schema: pa.Schema, table_name: str, null_order: NullOrder = NullOrder.FIRST
) -> dict[str, Any]:
    """The Avro record schema Hudi writes for a table of ``schema`` (meta fields excluded)."""
    data_fields = [f for f in schema if f.name not in HOODIE_META_COLUMNS]
    return arrow_to_avro_schema(
        pa.schema(data_fields), f"{table_name}_record", f"hoodie.{table_name}", null_order=null_order
    )


def create_table(
    uri: str,
    *,
    table_name: str,
    table_type: TableType,
    schema: pa.Schema,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    ordering_fields: Sequence[str] = (),
    merge_mode: RecordMergeMode | None = None,
    table_version: TableVersion = TableVersion.EIGHT,
    key_generator: KeyGeneratorType | None = None,
    hive_style_partitioning: bool = False,
    url_encode_partitioning: bool = False,
    database_name: str | None = "default",
    payload_class: str | None = None,
    merge_strategy_id: str | None = None,
    extra_properties: Mapping[str, str] | None = None,
    metadata_table: bool | None = None,
    **storage_options: Any,
) -> HoodieTable:
    """Create an empty table at ``uri`` and open it. Fails if a table already exists there.

    Tables of version 8 and 9 get a metadata table with its ``files`` partition, as Apache Hudi
    1.x creates one by default; ``metadata_table=False`` (or ``hoodie.metadata.enable=false`` in
    ``extra_properties``) leaves it out. Older versions never get one from hts.
    """
    fileio, base_path = FileIO.for_uri(uri, **storage_options)
    meta = join(base_path, METAFOLDER)
    if fileio.exists(join(meta, "hoodie.properties")):
        raise InvalidInputError(f"a Hudi table already exists at {uri}")
    if not table_name or not table_name.replace("_", "").isalnum():
        raise InvalidInputError(f"invalid table name {table_name!r}: use letters, digits and underscores")
    names = set(schema.names)
    if not record_key_fields:
        raise InvalidInputError("a table needs at least one record key field (--record-key)")
    for label, fields in (
        ("record key", record_key_fields),
        ("partition", partition_fields),
        ("ordering", ordering_fields),
    ):
        missing = [f for f in fields if f.split(":")[0] not in names]
        if missing:
            raise SchemaError(f"{label} field(s) {missing} are not columns of the data {sorted(names)}")
    if merge_mode is None:
        merge_mode = (
            RecordMergeMode.EVENT_TIME_ORDERING if ordering_fields else RecordMergeMode.COMMIT_TIME_ORDERING
        )
    if merge_mode is RecordMergeMode.EVENT_TIME_ORDERING and not ordering_fields:
        raise InvalidInputError("EVENT_TIME_ORDERING needs an ordering field (--ordering-field)")
    merge_strategy_id = merge_strategy_id or (extra_properties or {}).get("hoodie.record.merge.strategy.id")
    if merge_mode is RecordMergeMode.CUSTOM and payload_class is None and not merge_strategy_id:
        raise InvalidInputError("CUSTOM merge mode needs a payload class or hoodie.record.merge.strategy.id")
    if table_version is TableVersion.EIGHT and len(ordering_fields) > 1:
        raise InvalidInputError("table version 8 supports a single ordering field")

    kind = key_generator
    if kind is None:
        if not partition_fields:
            kind = KeyGeneratorType.NON_PARTITION
        elif len(partition_fields) == 1 and len(record_key_fields) == 1:
            kind = KeyGeneratorType.SIMPLE
        else:
            kind = KeyGeneratorType.COMPLEX
    version = int(table_version)
    create_schema = table_avro_schema(schema, table_name, NullOrder.LAST)
    avro_to_arrow_schema(create_schema)  # rejects column types Hudi cannot store
    props: dict[str, str] = {
        "hoodie.table.name": table_name,
        "hoodie.table.type": table_type.value,
        "hoodie.table.version": str(version),
        "hoodie.timeline.layout.version": str(table_version.timeline_layout),
        "hoodie.archivelog.folder": "archived",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.create.schema": json.dumps(create_schema, separators=(",", ":")),
    }
    if database_name:
        props["hoodie.database.name"] = database_name
    if version >= 8:
        props["hoodie.table.initial.version"] = str(version)
        props["hoodie.timeline.path"] = "timeline"
        props["hoodie.timeline.history.path"] = "history"
        props["hoodie.table.metadata.partitions"] = ""
        props["hoodie.table.metadata.partitions.inflight"] = ""
    if version >= 9:
        props["hoodie.table.format"] = "native"
    if ordering_fields:
        key = "hoodie.table.ordering.fields" if version >= 9 else "hoodie.table.precombine.field"
        props[key] = ",".join(ordering_fields)
    props.update(
        key_generator_properties(
            kind,
            record_key_fields,
            partition_fields,
            hive_style_partitioning,
            url_encode_partitioning,
            version,
        )
    )
    props.update(
        merge_properties_for_new_table(
            merge_mode,
            tuple(ordering_fields),
            table_version,
            payload_class=payload_class,
            strategy_id=merge_strategy_id,
        )
    )
    props.update(extra_properties or {})
    config = TableConfig.from_properties(props)  # validate before anything is written
    if metadata_table is None:
        default = "true" if version >= 8 else "false"
        enabled = (extra_properties or {}).get("hoodie.metadata.enable", default)
        metadata_table = enabled.strip().lower() == "true"
    if metadata_table and version < 8:
        raise InvalidInputError(
            f"hts creates metadata tables for table versions 8 and 9 only, not {version}; "
            "pass hoodie.metadata.enable=false. Nothing was written."
        )

    paths = TablePaths.of(base_path, config)
    for folder in (
        meta,
        paths.timeline,
        join(meta, ".temp"),
        join(meta, ".aux", ".bootstrap", ".partitions"),
        join(meta, ".aux", ".bootstrap", ".fileids"),
        join(meta, ".schema"),
    ):
        fileio.makedirs(folder)
    if version >= 8:
        fileio.makedirs(paths.history)
    else:
        fileio.makedirs(paths.archived)
    create_table_properties(fileio, meta, props)
    table = HoodieTable(fileio, base_path, config)
    if metadata_table:
        from hoodie.metadata.init import initialize_metadata_table

        now = dt.datetime.now(table.tz)
        initialize_metadata_table(table, lambda: format_instant_time(now, table.tz), table.reload())
    return table
