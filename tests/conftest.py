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
