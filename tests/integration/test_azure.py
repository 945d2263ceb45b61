"""Tables on Azure Blob Storage (Azurite, Microsoft's emulator) through ``pyarrow.fs.AzureFileSystem``.

URIs are Hudi's ``abfs://<container>@<account>.dfs.core.windows.net/<path>``; the table's
``storage_options`` are ``AzureFileSystem``'s keys. A round trip read back by hts, and one table
service (a compaction, scheduled and executed) on the same table.
"""

from __future__ import annotations

import uuid

import pytest

from hoodie.io.fileio import AzureFileIO, FileIO
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from tests.servers.azurite import AzureEndpoint
from tests.tables import new_table, rows


def _snapshot(uri: str, options: dict[str, str]) -> list[tuple[str, int]]:
    table = TableReader(HoodieTable.open(uri, **options)).snapshot()
    return sorted(zip(table.column("id").to_pylist(), table.column("ts").to_pylist(), strict=True))


def test_a_table_round_trips_and_compacts_on_azure(azurite: AzureEndpoint) -> None:
    uri = azurite.uri(f"{uuid.uuid4().hex}/trips")
    options = azurite.storage_options()
    table = new_table(uri, **options)
    assert isinstance(table.fileio, AzureFileIO) and table.uri() == uri
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    writer.upsert(rows(range(0, 6, 2), 2))
    expected = [(f"k{i}", 2 if i % 2 == 0 else 1) for i in range(6)]
    assert _snapshot(uri, options) == expected
    scheduled = schedule_compaction(ServiceContext(HoodieTable.open(uri, **options)), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ctx = ServiceContext(HoodieTable.open(uri, **options), storage_options=options)
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    done = HoodieTable.open(uri, **options).reload().get(scheduled.instant_time, Action.COMMIT)
    assert done is not None and done.is_completed
    assert _snapshot(uri, options) == expected


def test_an_azure_uri_without_its_account_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"abfs://lake/t: an Azure URI names its container and account"):
        FileIO.for_uri("abfs://lake/t", account_name="x")
