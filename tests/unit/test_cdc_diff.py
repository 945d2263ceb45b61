"""The changes of one file group, by key: what a CDC log of a rewrite or a compaction holds."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hoodie.cdc.logger import diff_by_key, traced_changes
from hoodie.config.table_config import RecordMergeMode
from hoodie.merge.log_entries import DeleteEntries, MergeSpec
from hoodie.merge.trace import MergeTrace
from hoodie.merge.vectorized import iter_merge_slice

SCHEMA = pa.schema(
    [("_hoodie_commit_time", pa.string()), ("_hoodie_record_key", pa.string()), ("v", pa.int64())]
)


def _table(rows: list[tuple[str, str, int]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"_hoodie_commit_time": c, "_hoodie_record_key": k, "v": v} for c, k, v in rows], schema=SCHEMA
    )


def _changes(before: pa.Table, after: pa.Table) -> set[tuple[str, str, int | None, int | None]]:
    ch = diff_by_key(before, after)
    b, a = before["v"].to_pylist(), after["v"].to_pylist()
    return {
        (op, key, b[i] if i >= 0 else None, a[j] if j >= 0 else None)
        for op, key, i, j in zip(ch.ops.to_pylist(), ch.keys.to_pylist(), ch.before, ch.after, strict=True)
    }


def _model(before: pa.Table, after: pa.Table) -> set[tuple[str, str, int | None, int | None]]:
    b = {r["_hoodie_record_key"]: r for r in before.to_pylist()}
    a = {r["_hoodie_record_key"]: r for r in after.to_pylist()}
    out = set()
    for k in b.keys() | a.keys():
        if k not in a:
            out.add(("d", k, b[k]["v"], None))
        elif k not in b:
            out.add(("i", k, None, a[k]["v"]))
        elif a[k]["_hoodie_commit_time"] != b[k]["_hoodie_commit_time"]:
            out.add(("u", k, b[k]["v"], a[k]["v"]))
    return out


def test_aligned_output_updates_and_inserts() -> None:
    before = _table([("1", "a", 1), ("1", "b", 2), ("1", "c", 3)])
    after = _table([("1", "a", 1), ("2", "b", 20), ("1", "c", 3), ("2", "d", 4)])
    assert _changes(before, after) == {("u", "b", 2, 20), ("i", "d", None, 4)}


def test_a_kept_record_is_no_change() -> None:
    before = _table([("1", "a", 1)])
    assert _changes(before, _table([("1", "a", 1)])) == set()
    assert _changes(_table([]), _table([])) == set()


@pytest.mark.parametrize("seed", range(20))
def test_random_rewrites_equal_the_model(seed: int) -> None:
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(rng.randint(0, 30))]
    before = [("1", k, i) for i, k in enumerate(keys)]
    after = []
    for c, k, v in before:
        roll = rng.random()
        if roll < 0.2:
            continue  # deleted
        after.append(("2", k, v + 100) if roll < 0.5 else (c, k, v))
    after += [("2", f"n{i}", 1000 + i) for i in range(rng.randint(0, 5))]
    if rng.random() < 0.5:
        rng.shuffle(after)
    b, a = _table(before), _table(after)
    assert _changes(b, a) == _model(b, a)


TRACED = pa.schema(
    [
        ("_hoodie_commit_time", pa.string()),
        ("_hoodie_record_key", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.int64()),
    ]
)


def _random_merge(
    rng: random.Random, event_time: bool
) -> tuple[pa.Table, list[pa.Table], MergeTrace, pa.Table]:
    """A base read in batches merged with log batches (data and deletes), traced: (base, trace,
    merged output)."""
    keys = [f"k{i:03d}" for i in rng.sample(range(200), rng.randint(0, 60))]
    base = pa.Table.from_pylist(
        [
            {"_hoodie_commit_time": "1", "_hoodie_record_key": k, "ts": rng.randint(0, 5), "v": i}
            for i, k in enumerate(keys)
        ],
        schema=TRACED,
    )
    pool = [*keys, *(f"n{i:03d}" for i in range(30))]
    logs: list[pa.Table | DeleteEntries] = []
    for commit in range(2, 2 + rng.randint(0, 4)):
        picked = rng.sample(pool, rng.randint(0, min(len(pool), 25)))
        if rng.random() < 0.3:
            logs.append(
                DeleteEntries(
                    pa.array(picked, pa.string()),
                    [rng.randint(0, 5) for _ in picked],
                    ["LongWrapper"] * len(picked),
                )
            )
        else:
            logs.append(
                pa.Table.from_pylist(
                    [
                        {
                            "_hoodie_commit_time": str(commit),
                            "_hoodie_record_key": k,
                            "ts": rng.randint(0, 5),
                            "v": 1000 * commit + j,
                        }
                        for j, k in enumerate(picked)
                    ],
                    schema=TRACED,
                )
            )
    step = rng.randint(1, 20)
    batches = [base.slice(i, step) for i in range(0, base.num_rows, step)]
    spec = MergeSpec(
        RecordMergeMode.EVENT_TIME_ORDERING if event_time else RecordMergeMode.COMMIT_TIME_ORDERING,
        ("ts",) if event_time else (),
    )
    trace = MergeTrace()
    parts = list(iter_merge_slice(batches, logs, spec, base_schema=TRACED, trace=trace))
    after = pa.concat_tables(parts) if parts else TRACED.empty_table()
    return base, trace, after


@pytest.mark.parametrize("event_time", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_the_merges_trace_gives_the_diff_by_key(seed: int, event_time: bool) -> None:
    """A compaction's CDC changes read off the vectorized merge's trace equal the diff by key of the
    old base rows and the merged output, record for record and in the same order."""
    base, trace, after = _random_merge(random.Random(seed), event_time)
    assert trace.complete and trace.base_rows == base.num_rows
    before = pa.concat_tables(trace.base_parts) if trace.base_parts else TRACED.empty_table()
    assert before.equals(base)
    traced, keyed = traced_changes(trace, before, after), diff_by_key(base, after)
    assert traced.ops.equals(keyed.ops) and traced.keys.equals(keyed.keys)
    assert traced.before.tolist() == keyed.before.tolist() and traced.after.tolist() == keyed.after.tolist()
