"""The ``files`` partition decoded into columns (``MetadataTable.file_columns``, planners' listings)
equals ``list_files`` (the record-by-record decode and merge), on Apache Hudi's metadata tables
and ours; the columnar decoder equals fastavro's record by record, and leaves to it what it does
not take."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodie.config.table_config import TableType
from hoodie.metadata.avro_encoder import zigzag
from hoodie.metadata.files_columns import MAX_ENTRIES, decode_file_lists
from hoodie.metadata.records import META_FIELDS, RecordType, decode_payload, encode_payload, files_payload
from hoodie.metadata.table import MetadataTable
from hoodie.services.clean_planner import list_partitions, plan_clean
from hoodie.services.clean_policy import CleanPolicy
from hoodie.services.compaction import CompactionPolicy
from hoodie.services.planning import metadata_listing_source
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter
from tests.conftest import fixture_path
from tests.services.test_planning_scale import _compact, _mor, _upsert
from tests.unit.test_mdt import MDT_FIXTURES


def _as_dicts(mdt: MetadataTable, partitions: list[str] | None = None) -> dict[str, list[tuple[str, int]]]:
    columns = mdt.file_columns(partitions)
    return {
        listing.partition_path: list(zip(listing.names, listing.sizes, strict=True))
        for listing in columns.listings()
    }


def _expected(mdt: MetadataTable, partitions: list[str] | None = None) -> dict[str, list[tuple[str, int]]]:
    wanted = sorted(set(partitions)) if partitions is not None else None
    return {p: list(files.items()) for p, files in sorted(mdt.list_files(wanted).items())}


def _decoded(value: bytes, version: int) -> list[tuple[str, int, bool]] | None:
    payload = decode_payload(value, version)
    if payload["type"] != RecordType.FILE_LIST:
        return None
    files = payload["filesystemMetadata"] or {}
    return [(n, int(i["size"]), bool(i["isDeleted"])) for n, i in files.items()]


def _columns_of(values: list[bytes]) -> list[list[tuple[str, int, bool]] | None]:
    got = decode_file_lists(values)
    out: list[list[tuple[str, int, bool]] | None] = [[] if ok else None for ok in got.taken.tolist()]
    rows = zip(
        got.record.tolist(), got.name.to_pylist(), got.size.tolist(), got.deleted.tolist(), strict=True
    )
    for record, name, size, deleted in rows:
        entries = out[record]
        assert entries is not None
        entries.append((name, size, deleted))
    return out


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_columns_of_hudi_metadata_tables_equal_list_files(fixture_root: Path, name: str) -> None:
    mdt = MetadataTable.open(HoodieTable.open(str(fixture_path(fixture_root, name))))
    listed = _expected(mdt)
    assert listed and _as_dicts(mdt) == listed
    some = [*sorted(listed)[:1], "not-a-partition", *sorted(listed)[:1]]
    assert _as_dicts(mdt, some) == _expected(mdt, some)


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_decoder_equals_fastavro_on_hudi_files_records(fixture_root: Path, name: str) -> None:
    """Every value of the files partition that Apache Hudi wrote (base files and log blocks) with
    the reader's schema, record by record."""
    mdt = MetadataTable.open(HoodieTable.open(str(fixture_path(fixture_root, name))))
    values = [
        value
        for file_slice in mdt.file_slices("files")
        for _, value, schema in mdt._slice_values(file_slice, None)
        if value and schema is None
    ]
    assert values
    expected = [_decoded(v, mdt.table_version) for v in values]
    assert _columns_of(values) == expected
    assert any(e is not None for e in expected)  # some file lists were taken by the columnar decoder


def _table_with_history(path: Path) -> HoodieTable:
    data = pa.table({"id": [f"k{i}" for i in range(40)], "p": ["a", "b", "c", "d"] * 10, "ts": [1] * 40})
    table = create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=data.schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        metadata_table=True,
    )
    writer = HoodieWriter(table)
    writer.insert(data)
    writer.upsert(data.slice(0, 8))
    writer.delete(data.slice(8, 4).select(["id", "p"]))
    writer.upsert(data.slice(20, 6))
    return HoodieTable.open(str(path))


def test_columns_of_our_metadata_table_with_log_blocks_equal_list_files(tmp_path: Path) -> None:
    """Keys written by several delta commits (log blocks over the base file) are merged as
    ``list_files`` merges them; the others come from the columnar decoder."""
    mdt = MetadataTable.open(_table_with_history(tmp_path / "t"))
    assert any(s.log_files for s in mdt.file_slices("files"))
    listed = _expected(mdt)
    assert sorted(listed) == ["a", "b", "c", "d"]
    assert _as_dicts(mdt) == listed
    assert _as_dicts(mdt, ["d", "b", "zz"]) == _expected(mdt, ["d", "b", "zz"])


def _hand_written(entries: list[tuple[str, int, bool]], *, blocks: int, meta: str | None) -> bytes:
    """A FILE_LIST datum written by hand: the map in ``blocks`` blocks, each with a negative
    count and its byte size (Avro's blocked form, which fastavro reads and does not write)."""
    head = b"".join(
        b"\x00" if meta is None else b"\x02" + zigzag(len(meta)) + meta.encode() for _ in META_FIELDS
    )
    head += zigzag(0) + zigzag(int(RecordType.FILE_LIST)) + zigzag(1)
    body = b""
    per = max(1, -(-len(entries) // blocks))
    for i in range(0, len(entries), per):
        chunk = b"".join(
            zigzag(len(n.encode())) + n.encode() + zigzag(s) + (b"\x01" if d else b"\x00")
            for n, s, d in entries[i : i + per]
        )
        body += zigzag(-len(entries[i : i + per])) + zigzag(len(chunk)) + chunk
    return head + body + zigzag(0) + b"\x00" * 4


def test_decoder_edge_cases_equal_fastavro() -> None:
    written = [
        encode_payload(files_payload({"f1.parquet": (10, False), "gone.parquet": (0, True)}), 8),
        encode_payload(files_payload({}), 8),
        encode_payload(files_payload({"p1": (0, False)}, all_partitions=True), 8),  # not a file list
        encode_payload(
            files_payload({"é-ü.parquet": (2**40, False), "": (1, False)}), 8, file_name="x.hfile"
        ),
        _hand_written([(f".f{i}_1.log.1_0-1-0", i * 1000, i % 3 == 0) for i in range(7)], blocks=3, meta="m"),
        _hand_written([("big", 2**62, False), ("neg", -5, True)], blocks=1, meta=None),
    ]
    got = _columns_of(written)
    assert got == [_decoded(v, 8) for v in written]
    assert got[2] is None  # left to the record-by-record decoder


def test_decoder_leaves_long_maps_and_bad_bytes_to_the_record_decoder() -> None:
    good = encode_payload(files_payload({"a.parquet": (1, False)}), 8)
    long_map = encode_payload(files_payload({f"{i}.parquet": (i, False) for i in range(MAX_ENTRIES + 1)}), 8)
    truncated = good[:-3]
    trailing = good + b"\x00"
    bad_flag = good[:-5] + b"\x07" + good[-4:]
    got = decode_file_lists([good, long_map, truncated, trailing, bad_flag, good])
    assert got.taken.tolist() == [True, False, False, False, False, True]
    assert got.record.tolist() == [0, 5]
    assert got.name.to_pylist() == ["a.parquet", "a.parquet"]
    assert _decoded(long_map, 8) is not None  # what the table reader then decodes one by one


def test_decoder_of_no_values() -> None:
    got = decode_file_lists([])
    assert len(got.name) == 0 and got.taken.tolist() == []


def test_clean_plans_from_the_metadata_table_equal_those_from_storage(tmp_path: Path) -> None:
    """The clean planner's names cut from the columns (and its file index taking them whole) plan
    what a storage listing plans."""
    path = tmp_path / "t"
    _compact(_mor(path), CompactionPolicy())
    _upsert(path, [1, 2, 3], 3)
    _compact(HoodieTable.open(str(path)), CompactionPolicy())
    table = _upsert(path, [1, 14], 4)
    assert metadata_listing_source(table, table.reload()) is not None
    policy = CleanPolicy(commits_retained=1)
    from_metadata = plan_clean(table, policy)
    from_storage = plan_clean(table, policy, listing=list_partitions(table.fileio, table.base_path))
    assert from_metadata.plan is not None
    assert from_metadata == from_storage
