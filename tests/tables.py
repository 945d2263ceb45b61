"""Small tables for tests: keyed by ``id``, partitioned by ``p``, ordered by ``ts``.

``rows(ids, ts)`` gives each id a value that names its ordering value, so a read shows which
write won; ``new_table`` creates the table the rows fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from hoodie.config.table_config import TableType, TableVersion
from hoodie.table import HoodieTable
from hoodie.write.create import create_table

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())])


def rows(
    ids: Iterable[int], ts: int, *, partitions: int = 3, schema: pa.Schema = SCHEMA, **extra: Any
) -> pa.Table:
    """Records ``k<i>`` in partition ``p<i % partitions>`` with ordering value ``ts``; ``extra``
    sets further columns of ``schema`` to one value for all."""
    return pa.Table.from_pylist(
        [{"id": f"k{i}", "ts": ts, "v": f"v{i}@{ts}", "p": f"p{i % partitions}", **extra} for i in ids],
        schema=schema,
    )


def new_table(
    path: Path | str,
    *,
    table_type: TableType = TableType.MERGE_ON_READ,
    version: TableVersion = TableVersion.EIGHT,
    schema: pa.Schema = SCHEMA,
    **options: Any,
) -> HoodieTable:
    """An empty table at ``path`` for rows of ``schema``; ``options`` go to ``create_table``."""
    return create_table(
        str(path),
        table_name="t",
        table_type=table_type,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        table_version=version,
        **options,
    )
