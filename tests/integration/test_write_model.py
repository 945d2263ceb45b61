"""Tables our writer creates read identically through ``hoodie`` and hudi-rs, and both equal a model.

Hypothesis generates sequences of inserts, upserts (with late-arriving, lower ordering values)
and deletes (with and without ordering values) on COW and MOR tables of table versions 6, 8
and 9, partitioned or not, in both merge modes, with Avro or Parquet log blocks.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
from hudi import HudiTableBuilder
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hoodie.config.table_config import RecordMergeMode, TableType, TableVersion
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.integration.hudi_model import TableModel

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())])
KEYS = [f"k{i}" for i in range(6)]
_counter = itertools.count()


def _partition(key: str, partitioned: bool) -> str:
    return f"p{int(key[1:]) % 2}" if partitioned else ""


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    config = {
        "mor": draw(st.booleans()),
        "version": draw(st.sampled_from([TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE])),
        "partitioned": draw(st.booleans()),
        "event_time": draw(st.booleans()),
        "block": draw(st.sampled_from([LogBlockFormat.AVRO, LogBlockFormat.PARQUET])),
    }
    ops = []
    fresh = list(KEYS)
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["insert", "upsert", "upsert", "delete"]))
        if kind == "insert":
            if not fresh:
                continue
            n = draw(st.integers(1, len(fresh)))
            keys, fresh = fresh[:n], fresh[n:]
        else:
            keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
        rows = [{"id": k, "ts": draw(st.integers(0, 4)), "v": f"w{len(ops)}r{i}"} for i, k in enumerate(keys)]
        for k in keys:
            if k in fresh:
                fresh.remove(k)
        ops.append((kind, rows, draw(st.booleans())))
    return {"config": config, "ops": ops}


_MOR_EVENT = {
    "mor": True,
    "version": TableVersion.EIGHT,
    "partitioned": False,
    "event_time": True,
    "block": LogBlockFormat.AVRO,
}


def _table(rows: list[dict[str, Any]], partitioned: bool) -> pa.Table:
    full = [{**r, "p": _partition(r["id"], partitioned) or None} for r in rows]
    return pa.Table.from_pylist(full, schema=SCHEMA)


def _project(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.select(["id", "ts", "v"]).to_pylist(), key=lambda r: r["id"])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenario=scenarios())
# Hudi resurrects a base row when a delete is followed by a re-insert with a lower ordering value.
@example(
    scenario={
        "config": _MOR_EVENT,
        "ops": [
            ("insert", [{"id": "k0", "ts": 3, "v": "base"}], False),
            ("delete", [{"id": "k0", "ts": 0, "v": "-"}], False),
            ("upsert", [{"id": "k0", "ts": 1, "v": "late"}], False),
        ],
    }
)
# A delete carrying an ordering value lower than the stored record's is ignored; an equal one applies.
@example(
    scenario={
        "config": _MOR_EVENT,
        "ops": [
            ("insert", [{"id": "k0", "ts": 3, "v": "a"}, {"id": "k1", "ts": 3, "v": "b"}], False),
            ("delete", [{"id": "k0", "ts": 2, "v": "-"}, {"id": "k1", "ts": 3, "v": "-"}], True),
        ],
    }
)
def test_reads_equal_the_model(tmp_path: Path, scenario: dict[str, Any]) -> None:
    cfg = scenario["config"]
    path = tmp_path / f"t{next(_counter)}"
    table = create_table(
        str(path),
        table_name="model",
        table_type=TableType.MERGE_ON_READ if cfg["mor"] else TableType.COPY_ON_WRITE,
        schema=SCHEMA,
        record_key_fields=["id"],
        partition_fields=["p"] if cfg["partitioned"] else [],
        ordering_fields=["ts"],
        merge_mode=RecordMergeMode.EVENT_TIME_ORDERING
        if cfg["event_time"]
        else RecordMergeMode.COMMIT_TIME_ORDERING,
        table_version=cfg["version"],
    )
    writer = HoodieWriter(table, options=WriteOptions(log_block_format=cfg["block"]))
    model = TableModel(cfg["mor"], cfg["event_time"])
    for kind, rows, with_ordering in scenario["ops"]:
        data = _table(rows, cfg["partitioned"])
        if kind == "insert":
            writer.insert(data)
            model.insert(rows)
        elif kind == "upsert":
            writer.upsert(data)
            model.upsert(rows)
        else:
            writer.delete(data if with_ordering else data.select(["id", "p"]))
            model.delete(rows, with_ordering)
    expected = model.snapshot()
    ours = _project(TableReader(HoodieTable.open(str(path))).snapshot())
    assert ours == expected, f"{cfg} {scenario['ops']}"
    batches = HudiTableBuilder.from_base_uri(str(path)).build().read()
    theirs = _project(pa.Table.from_batches(batches)) if batches else []
    assert theirs == expected, f"hudi-rs differs: {cfg} {scenario['ops']}"
