"""The shape matrix over the census: each shape built as Hudi's writers leave it on storage, then every
operation through the CLI. A refused one exits non-zero naming the shape and leaves every file of
the table (outside hts's own ``.hoodie/.aux/hts/`` and heartbeats) byte-identical; a handled one
still works.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.read.reader import TableReader
from hoodie.shape.matrix import (
    MATRIX,
    OPEN_REFUSED,
    OPERATIONS,
    WRITE_OPERATIONS,
    Shape,
    cell,
    markdown_table,
)
from hoodie.table import HoodieTable
from hoodie.write.options import WriteOperation
from service.cli import main
from tests.services.shapes_support import CASES, Case, base_table, table_hash
from tests.tables import rows

SERVICES_RUN = ("compaction", "logcompaction", "clustering", "clean", "archival")
"""Services the matrix test runs end to end when handled (the others need an instant or an index named)."""


WRITES = {
    "upsert": (range(6, 18), 3, 3),
    "bulk_insert": (range(103, 109), 3, 100),
    "delete": (range(10, 14), 4, 3),
}
"""The writes the matrix runs: operation -> (ids, ordering value, partitions). The bulk insert goes to
new partitions (p3..p8): on a bucket table, Hudi's bulk insert starts a file group per bucket."""


def _invocations(op: str, path: Path, tmp: Path, options: dict[str, str]) -> list[list[str]]:
    opts = [a for k, v in options.items() for a in ("--option", f"{k}={v}")]
    if op == "read":
        return [["read", str(path), "--out", str(tmp / "out.parquet")]]
    if op == "write":
        out = []
        for w, (ids, ts, partitions) in WRITES.items():
            data = tmp / f"{w}.parquet"
            pq.write_table(rows(ids, ts, partitions=partitions), data)
            out.append(["write", str(path), "--input", str(data), "--operation", w, *opts])
        return out
    return [["run", op, str(path), "--spark-master", "in-process", *opts]]


def _keys(data: pa.Table) -> dict[str, int]:
    """Record key -> ordering value of a read (each key at most once)."""
    pairs = list(zip(data.column("id").to_pylist(), data.column("ts").to_pylist(), strict=True))
    assert len(pairs) == len({k for k, _ in pairs}), "a key read twice"
    return dict(pairs)


def _hudi_rs_keys(path: Path) -> dict[str, int]:
    from hudi import HudiTableBuilder

    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false").build()
    )
    return _keys(pa.Table.from_batches(table.read()))


@pytest.mark.parametrize("case", CASES, ids=[c.shape.name.lower() for c in CASES])
def test_shape_matrix(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every operation on every shape: refused ones name the shape and change no file; handled ones
    run, and the table then reads (ours and hudi-rs's) as a model of the writes that ran says."""
    path = base_table(tmp_path / "t")
    model = {f"k{i}": 2 if i % 2 == 0 else 1 for i in range(12)}  # base_table's inserts and upserts
    case.build(path)
    if case.shape not in OPEN_REFUSED:
        shape = HoodieTable.open(str(path)).shape(case.options)
        found = shape.feature(case.shape)
        assert found is not None and case.evidence in found.evidence, shape.features
    for op in ("read", "write", *SERVICES_RUN, "indexing", "rollback", "restore", "savepoint"):
        for argv in _invocations(op, path, tmp_path, case.options):
            write_op = argv[argv.index("--operation") + 1] if op == "write" else None
            refused = cell(case.shape, op, write_op)
            if refused is None and (op not in ("read", "write", *SERVICES_RUN)):
                continue  # handled; needs an instant or an index named to run (their own tests)
            before = table_hash(path)
            code = main(argv)
            err = capsys.readouterr().err
            if refused is not None:
                assert code != 0, (op, write_op)
                assert case.shape.value in err and case.evidence in err and "refused" in err, err
                assert table_hash(path) == before, (op, write_op)
                continue
            assert code == 0, (op, write_op, err)
            if write_op is not None:
                ids, ts, _ = WRITES[write_op]
                for i in ids:
                    if write_op == "delete":
                        model.pop(f"k{i}", None)
                    else:
                        model[f"k{i}"] = ts
    if cell(case.shape, "read") is None:
        assert _keys(TableReader(HoodieTable.open(str(path))).snapshot()) == model
        assert _hudi_rs_keys(path) == model


TESTED_ALONE = {
    Shape.PARTIAL_BLOCKS,
    Shape.UNMERGED_PARTIAL_BLOCKS,
    Shape.SECONDARY_INDEX,
    Shape.SECONDARY_INDEXED,
    Shape.CUSTOM_MERGE,
    Shape.MULTI_FIELD_ORDERING,
    Shape.VIRTUAL_KEYS,
    Shape.PARTIAL_UPDATES,
}
"""Shapes tested by their own tests: a secondary index on a table Apache Hudi wrote
(test_an_unmaintained_secondary_index_refuses_writes_only,
test_a_secondary_indexed_table_refuses_overwrites_and_partition_ttl; the base table cannot hold a built one);
the merge shapes whose only refusal is log compaction
(test_log_compaction_is_refused_on_merges_it_does_not_implement; their writes merge as their own
tests check); virtual keys, laid out as Hudi's writers leave them (tests/services/test_audit_keys.py)."""


def test_every_shape_of_the_census_is_in_the_matrix_and_tested() -> None:
    tested = {c.shape for c in CASES} | TESTED_ALONE
    informational = {s for s, row in MATRIX.items() if not row}
    # Shapes handled everywhere are shown in TableShape but need no refusal test; NBCC's bucket rules
    # are the simple bucket's.
    assert set(Shape) - informational <= tested


def test_matrix_lists_every_operation_for_open_refused_shapes() -> None:
    for shape in OPEN_REFUSED:
        assert set(MATRIX[shape]) == set(OPERATIONS)
        assert all(cell(shape, "write", w) is not None for w in WRITE_OPERATIONS)


def test_the_readme_matrix_is_the_modules_matrix() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("<!-- shape-matrix:start")
    body = readme[readme.index("\n", start) + 1 : readme.index("<!-- shape-matrix:end -->")]
    assert body.strip() == markdown_table()


def test_the_matrix_names_every_service_and_write_operation() -> None:
    from hoodie.services.base import KNOWN_SERVICES
    from hoodie.shape.matrix import SERVICE_OPERATIONS

    assert set(SERVICE_OPERATIONS) == set(KNOWN_SERVICES)
    assert set(WRITE_OPERATIONS) == {o.value for o in WriteOperation}
