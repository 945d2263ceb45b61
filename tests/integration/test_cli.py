"""The ``hts`` command line: read, write, timeline, quickstart; errors go to stderr with exit 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.table import HoodieTable
from service.cli import main
from tests.conftest import fixture_path


def _write_input(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_write_create_upsert_read_and_timeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "people"
    first = _write_input(
        tmp_path / "a.parquet", [{"id": "1", "ts": 1, "name": "ann"}, {"id": "2", "ts": 1, "name": "bob"}]
    )
    code = main(
        [
            "write",
            str(table),
            "--input",
            str(first),
            "--operation",
            "insert",
            "--create",
            "--record-key",
            "id",
            "--ordering-field",
            "ts",
            "--table-type",
            "MERGE_ON_READ",
        ]
    )
    assert code == 0
    assert "2 inserted" in capsys.readouterr().out
    assert HoodieTable.open(str(table)).config.metadata_partitions == ("files",), (
        "a metadata table by default"
    )
    plain = tmp_path / "plain"
    create = [
        "write",
        str(plain),
        "--input",
        str(first),
        "--operation",
        "insert",
        "--create",
        "--record-key",
        "id",
    ]
    assert main([*create, "--option", "hoodie.metadata.enable=false"]) == 0
    assert not (plain / ".hoodie" / "metadata").exists()
    second = _write_input(tmp_path / "b.parquet", [{"id": "1", "ts": 2, "name": "ANN"}])
    assert (
        main(
            [
                "write",
                str(table),
                "--input",
                str(second),
                "--operation",
                "upsert",
                "--log-block-format",
                "parquet",
            ]
        )
        == 0
    )
    out = tmp_path / "out.parquet"
    assert main(["read", str(table), "--out", str(out)]) == 0
    result = pq.read_table(out)
    assert sorted(result.select(["id", "name"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": "1", "name": "ANN"},
        {"id": "2", "name": "bob"},
    ]
    assert result.column_names[0] == "_hoodie_commit_time"
    assert main(["read", str(table), "--out", str(out), "--read-optimized"]) == 0
    assert sorted(pq.read_table(out)["name"].to_pylist()) == ["ann", "bob"]
    capsys.readouterr()
    assert main(["timeline", str(table), "--json"]) == 0
    timeline = json.loads(capsys.readouterr().out)
    assert [i["action"] for i in timeline["instants"]] == ["deltacommit", "deltacommit"]
    first_instant = timeline["instants"][0]["requested_time"]
    assert main(["read", str(table), "--out", str(out), "--as-of", first_instant]) == 0
    assert sorted(pq.read_table(out)["name"].to_pylist()) == ["ann", "bob"]


def test_reads_a_table_apache_hudi_wrote(
    fixture_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = fixture_path(fixture_root, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d")
    out = tmp_path / "trips.parquet"
    assert main(["read", str(source), "--out", str(out)]) == 0
    assert pq.read_table(out).num_rows == 6
    assert main(["timeline", str(source)]) == 0
    assert "indexing" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["read", "{missing}", "--out", "{tmp}/x.parquet"], "no Hudi table at"),
        (["write", "{missing}", "--input", "{tmp}/nope.parquet", "--operation", "upsert"], "no such file"),
        (
            ["write", "{table}", "--input", "{bad}", "--operation", "upsert"],
            "columns ['extra'] are not in the table schema",
        ),
        (
            ["write", "{missing}", "--input", "{good}", "--operation", "insert", "--create"],
            "--create needs --record-key",
        ),
        (["write", "{table}", "--input", "{good}", "--operation", "upsert", "--option", "oops"], "KEY=VALUE"),
    ],
)
def test_errors_are_clear_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    table = tmp_path / "t"
    good = _write_input(tmp_path / "good.parquet", [{"id": "1", "ts": 1}])
    bad = _write_input(tmp_path / "bad.parquet", [{"id": "1", "ts": 1, "extra": 5}])
    assert (
        main(
            [
                "write",
                str(table),
                "--input",
                str(good),
                "--operation",
                "insert",
                "--create",
                "--record-key",
                "id",
            ]
        )
        == 0
    )
    capsys.readouterr()
    subs = {
        "missing": str(tmp_path / "missing"),
        "tmp": str(tmp_path),
        "table": str(table),
        "bad": str(bad),
        "good": str(good),
    }
    assert main([a.format(**subs) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hts {argv[0]}: error:") and message in err


def test_installed_console_script_runs_the_quickstart(tmp_path: Path) -> None:
    hts = shutil.which("hts", path=str(Path(sys.executable).parent))
    assert hts is not None, "the hts console script is not installed in the venv"
    done = subprocess.run(
        [hts, "quickstart", "--dir", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Snapshot read (base files merged with log files) (7 rows)" in done.stdout
    assert (tmp_path / "trips" / ".hoodie" / "hoodie.properties").is_file()


def test_service_dry_run_prints_the_plan_and_writes_nothing(
    table_copy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = table_copy("sample_table/mor/parquet/v6_nonpartitioned")
    before = sorted(str(p) for p in path.rglob("*"))
    assert main(["run", "compaction", str(path), "--dry-run"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["scheduled"] is None
    (plan,) = printed["plans"]
    assert plan["version"] == 2 and plan["operations"][0]["deltaFilePaths"]
    assert sorted(str(p) for p in path.rglob("*")) == before


def test_services_refuse_metadata_partitions_they_cannot_maintain(
    table_copy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from hoodie.config.table_config import read_table_properties, update_table_properties
    from hoodie.io.fileio import FileIO

    path = table_copy("quickstart_trips_table/mor/avro/v8_trips_8i3u1d")
    fileio, base = FileIO.for_uri(str(path))
    meta = f"{base}/.hoodie"
    partitions = read_table_properties(fileio, meta)["hoodie.table.metadata.partitions"]
    update_table_properties(
        fileio, meta, {"hoodie.table.metadata.partitions": partitions + ",expr_index_fare"}
    )
    before = sorted(str(p) for p in path.rglob("*"))
    assert main(["run", "compaction", str(path), "--spark-master", "in-process"]) == 2
    err = capsys.readouterr().err  # the uniform shape refusal (hoodie.shape), naming the partition
    assert "expression index table" in err and "expr_index_fare" in err and "compaction is refused" in err
    assert sorted(str(p) for p in path.rglob("*")) == before
