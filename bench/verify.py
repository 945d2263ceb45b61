"""Checks run before anything is timed: the merge is right and the three readers agree."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from bench.data import DATA_SCHEMA, KEY, ORDERING, BenchData, expected_merge, make_inputs
from bench.readers import RECORD_KEY, differences, normalized


class VerificationError(AssertionError):
    """A reader returned rows other than the expected merged rows."""


def _nullable(table: pa.Table) -> pa.Table:
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


def check_ours(data: BenchData, ours: pa.Table) -> list[str]:
    """Our snapshot against the generator's inputs merged in memory; returns what was checked."""
    if ours.num_rows != data.rows:
        raise VerificationError(f"ours: {ours.num_rows:,} rows, expected {data.rows:,}")
    base, upd = make_inputs(data.rows, data.updates)
    expected = _nullable(expected_merge(base, upd)).combine_chunks()
    got = _nullable(ours.select(DATA_SCHEMA.names)).sort_by(KEY).combine_chunks()
    problems = differences(expected, got)
    if not pc.all(pc.equal(ours[RECORD_KEY], ours[KEY])).as_py():
        problems.append("_hoodie_record_key differs from the key column")
    if problems:
        raise VerificationError("ours differs from the expected merge: " + "; ".join(problems))
    # Updated keys must carry the update's ordering value (and so the update's row).
    mask = pc.is_in(got[KEY], value_set=upd[KEY])
    winners = got.filter(mask).sort_by(KEY)
    want = upd.sort_by(KEY)
    if winners.num_rows != upd.num_rows or not winners[ORDERING].equals(want[ORDERING]):
        raise VerificationError("ours: updated keys do not carry the updates' ordering values")
    return [
        f"ours: {ours.num_rows:,} rows, equal to the inputs merged in memory",
        f"ours: all {upd.num_rows:,} updated keys return the update (larger {ORDERING!r} wins)",
    ]


def check_agree(name: str, ours: pa.Table, other: pa.Table) -> str:
    """``other`` holds exactly our rows (all columns, meta fields included; any order)."""
    problems = differences(normalized(ours), normalized(other))
    if problems:
        raise VerificationError(f"{name} differs from ours: " + "; ".join(problems))
    return f"{name}: {other.num_rows:,} rows, identical to ours (all {ours.num_columns} columns)"
