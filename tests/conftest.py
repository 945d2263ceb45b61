"""Shared test fixtures: the real Apache Hudi tables from ``../shared/fixtures/hudi-tables``.

The zips are never copied into this repository; each test session unzips them once into a
temporary directory. A missing ``../shared`` is an error, not a skip: the suite must not pass
without the tables Apache Hudi wrote.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.servers.zookeeper",
    "tests.servers.dynamodb",
    "tests.servers.s3",
    "tests.servers.counted_aws",
    "tests.servers.azurite",
    "tests.services.archival_support",  # table_of: the archival tests' session-wide tables
]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HTS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "hudi-tables"


def fixture_names() -> list[str]:
    """Names like ``sample_table/mor/avro/v9_txns_simple_nometa`` for every zipped table."""
    if not FIXTURES.is_dir():
        raise RuntimeError(f"fixture tables not found at {FIXTURES}; set HTS_SHARED to the shared folder")
    return sorted(str(p.relative_to(FIXTURES).with_suffix("")) for p in FIXTURES.rglob("*.zip"))


def _unzip(zip_path: Path, dest: Path) -> Path:
    with zipfile.ZipFile(zip_path) as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX/")]
        zf.extractall(dest, members)
    name = zip_path.stem
    root = dest / name
    return root if (root / ".hoodie").is_dir() else dest


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide directory holding every fixture table, unzipped, read-only by convention."""
    root = tmp_path_factory.mktemp("hudi-fixtures")
    for name in fixture_names():
        _unzip(FIXTURES / f"{name}.zip", root / name)
    return root


def fixture_path(fixture_root: Path, name: str) -> Path:
    """The base path of fixture ``name`` under ``fixture_root``."""
    base = fixture_root / name
    inner = base / Path(name).name
    return inner if (inner / ".hoodie").is_dir() else base


@pytest.fixture()
def table_copy(fixture_root: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Factory: a private, writable copy of a fixture table (for tests that modify tables)."""

    def make(name: str) -> Path:
        src = fixture_path(fixture_root, name)
        dst = tmp_path / Path(name).name
        shutil.copytree(src, dst)
        return dst

    return make


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test session (Spark starts slowly)."""
    from jobs.spark import spark_session

    session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture()
def spark_runner(spark):  # type: ignore[no-untyped-def]
    """A :class:`jobs.spark.SparkRunner` on the session's SparkSession."""
    from jobs.spark import SparkRunner

    return SparkRunner(spark)


NO_METADATA_TABLE = [
    "quickstart_trips_table/mor/avro/v6_trips_8i1u",
    "sample_table/cow/v6_nonpartitioned",
    "sample_table/cow/v8_nonpartitioned",
    "sample_table/cow/v8_simplekeygen_nonhivestyle",
    "sample_table/cow/v9_txns_simple_nometa",
    "sample_table/mor/avro/v9_txns_nonpart_nometa",
    "sample_table/mor/avro/v9_txns_simple_nometa",
    "sample_table/mor/parquet/v6_nonpartitioned",
    "sample_table/mor/parquet/v6_nonpartitioned_rollback",
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle",
]
"""Fixture tables without a metadata table."""


def hudi_rs_rows(path: Path, drop: tuple[str, ...] = ("_hoodie_file_name",)) -> list[str]:
    """What hudi-rs reads from a table, every column but ``drop``, as sorted row strings."""
    import pyarrow as pa
    from hudi import HudiTableBuilder

    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false").build()
    )
    batches = table.read()
    if not batches:
        return []
    data = pa.Table.from_batches(batches)
    return sorted(str(r) for r in data.drop_columns([c for c in drop if c in data.column_names]).to_pylist())
