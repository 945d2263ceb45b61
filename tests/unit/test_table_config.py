"""hoodie.properties: Java properties text, Hudi's checksum, typed keys and fail-fast validation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodie.config.properties import format_properties, parse_properties
from hoodie.config.table_config import (
    PROPERTIES_BACKUP_FILE,
    PROPERTIES_FILE,
    RecordMergeMode,
    TableConfig,
    TableType,
    TableVersion,
    read_table_properties,
    table_checksum,
    unknown_property,
    update_table_properties,
)
from hoodie.errors import InvalidTableConfigError, UnsupportedTableError
from hoodie.io import LocalFileIO
from tests.conftest import fixture_names, fixture_path


@pytest.mark.parametrize(
    ("db", "name", "expected"),
    [
        ("default", "v8_trips_8i3u1d", 1197752875),
        (None, "v8_trips_8i3u1d_metadata", 380169000),
        ("default", "v9_txns_mor_complex_meta", 3642927758),
        (None, "v9_txns_mor_complex_meta_metadata", 460661448),
        ("default", "v6_nonpartitioned_rollback", 1120353670),
    ],
)
def test_checksum_matches_values_hudi_wrote(db: str | None, name: str, expected: int) -> None:
    props = {"hoodie.table.name": name}
    if db:
        props["hoodie.database.name"] = db
    assert table_checksum(props) == expected


def test_java_properties_escapes_round_trip() -> None:
    text = (
        '#c\nhoodie.table.create.schema={"type"\\:"record"}\n'
        "k\\ with\\ space = a\\=b\\:c\\\\\n  \\u00e9t\\u00E9=x\n"
    )
    props = parse_properties(text)
    assert props["hoodie.table.create.schema"] == '{"type":"record"}'
    assert props["k with space"] == "a=b:c\\"
    assert props["été"] == "x"
    assert parse_properties(format_properties(props, "saved")) == props


def test_continuation_lines_join() -> None:
    assert parse_properties("a=one \\\n    two\n! comment\n# other\n") == {"a": "one two"}


@given(st.dictionaries(st.text(min_size=1), st.text()))
def test_format_then_parse_is_identity(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props, "x")) == props


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_config_opens(fixture_root: Path, name: str) -> None:
    meta = fixture_path(fixture_root, name) / ".hoodie"
    config = TableConfig.from_properties(read_table_properties(LocalFileIO(), str(meta)))
    assert config.table_version in (TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE)
    assert config.timeline_layout == (1 if config.table_version == 6 else 2)
    assert config.table_type in (TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ)


def test_v9_ordering_fields_and_v8_precombine_alias(fixture_root: Path) -> None:
    io = LocalFileIO()
    v9 = fixture_path(fixture_root, "sample_table/mor/avro/v9_txns_simple_nometa") / ".hoodie"
    v8 = fixture_path(fixture_root, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d") / ".hoodie"
    c9 = TableConfig.from_properties(read_table_properties(io, str(v9)))
    c8 = TableConfig.from_properties(read_table_properties(io, str(v8)))
    assert c9.ordering_fields == ("txn_ts",)
    assert c8.ordering_fields == ("ts",)
    assert c8.merge_mode is RecordMergeMode.EVENT_TIME_ORDERING
    assert c8.partition_fields == ("city",)
    assert c8.metadata_partitions[0] == "column_stats"


def _copy_meta(fixture_root: Path, tmp_path: Path) -> Path:
    src = fixture_path(fixture_root, "sample_table/cow/v8_nonpartitioned") / ".hoodie" / PROPERTIES_FILE
    meta = tmp_path / ".hoodie"
    meta.mkdir()
    shutil.copy(src, meta / PROPERTIES_FILE)
    return meta


def test_checksum_mismatch_is_rejected_naming_both_values(fixture_root: Path, tmp_path: Path) -> None:
    meta = _copy_meta(fixture_root, tmp_path)
    text = (
        (meta / PROPERTIES_FILE)
        .read_text()
        .replace("hoodie.table.name=v8_nonpartitioned", "hoodie.table.name=x")
    )
    (meta / PROPERTIES_FILE).write_text(text)
    with pytest.raises(
        InvalidTableConfigError, match=r"hoodie.table.checksum=\d+ does not match .*'default.x'"
    ):
        read_table_properties(LocalFileIO(), str(meta))


def test_backup_is_used_when_the_primary_is_corrupt(fixture_root: Path, tmp_path: Path) -> None:
    meta = _copy_meta(fixture_root, tmp_path)
    shutil.copy(meta / PROPERTIES_FILE, meta / PROPERTIES_BACKUP_FILE)
    (meta / PROPERTIES_FILE).write_text("hoodie.table.name=broken\nhoodie.table.checksum=1\n")
    props = read_table_properties(LocalFileIO(), str(meta))
    assert props["hoodie.table.name"] == "v8_nonpartitioned"


def test_unknown_table_version_is_named(fixture_root: Path, tmp_path: Path) -> None:
    meta = _copy_meta(fixture_root, tmp_path)
    props = read_table_properties(LocalFileIO(), str(meta))
    props["hoodie.table.version"] = "7"
    with pytest.raises(UnsupportedTableError, match="hoodie.table.version=7"):
        TableConfig.from_properties(props)
    props["hoodie.table.version"] = "8"
    props["hoodie.timeline.layout.version"] = "1"
    with pytest.raises(UnsupportedTableError, match="layout.version=1 does not match table version 8"):
        TableConfig.from_properties(props)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("hoodie.table.base.file.format", "ORC", "base.file.format=ORC"),
        ("hoodie.datasource.write.drop.partition.columns", "true", "drop.partition.columns=true"),
        ("hoodie.table.type", "MERGE_ON_WRITE", "hoodie.table.type='MERGE_ON_WRITE'"),
        ("hoodie.record.merge.mode", "LATEST", "hoodie.record.merge.mode='LATEST'"),
        ("hoodie.bootstrap.base.path", "/src", "bootstrapped"),
        # HoodieTableConfig.BASE_FILE_FORMAT's alternative (tables of old releases)
        ("hoodie.table.ro.file.format", "ORC", "base.file.format=ORC"),
        # census section 20: a known key hts does not implement (unknown keys: the shape matrix)
        ("hoodie.partition.metafile.use.base.format", "true", "unimplemented property table"),
        ("hoodie.table.secondary.indexes.metadata", "[]", r"secondary.indexes.metadata=\[\]"),
    ],
)
def test_unsupported_values_fail_fast(
    fixture_root: Path, tmp_path: Path, key: str, value: str, message: str
) -> None:
    meta = _copy_meta(fixture_root, tmp_path)
    props = read_table_properties(LocalFileIO(), str(meta))
    props[key] = value
    with pytest.raises(UnsupportedTableError, match=message):
        TableConfig.from_properties(props)


def test_an_unknown_key_opens_and_is_named(fixture_root: Path, tmp_path: Path) -> None:
    """A key hts does not know does not refuse the table on open (Hudi's readers ignore it); the shape
    matrix refuses every operation that writes on it (tests/services/test_shapes.py)."""
    meta = _copy_meta(fixture_root, tmp_path)
    props = read_table_properties(LocalFileIO(), str(meta))
    assert unknown_property(props) is None
    props["com.acme.catalog.sync.id"] = "42"
    assert TableConfig.from_properties(props).props["com.acme.catalog.sync.id"] == "42"
    assert unknown_property(props) == "com.acme.catalog.sync.id=42"


def test_update_keeps_checksum_valid_and_removes_backup(fixture_root: Path, tmp_path: Path) -> None:
    meta = _copy_meta(fixture_root, tmp_path)
    io = LocalFileIO()
    written = update_table_properties(io, str(meta), {"hoodie.table.metadata.partitions": "", "x.y": "1"})
    assert written["x.y"] == "1"
    assert not (meta / PROPERTIES_BACKUP_FILE).exists()
    assert read_table_properties(io, str(meta))["hoodie.table.checksum"] == str(table_checksum(written))
