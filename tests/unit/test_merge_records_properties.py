"""Properties of the per-record merge engine over random bases and logs (hypothesis): block splits do
not change a merge; COMMIT_TIME is last write wins; EVENT_TIME follows the vectorisable rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hoodie.merge.buffer import merge_file_group
from hoodie.merge.config import MergeConfig
from hoodie.merge.records import DataEntry, DeleteEntry, LogEntry
from tests.unit.merge_support import CT, EV, key_of

# -- properties ------------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])


@st.composite
def log_entries(draw: st.DrawFn, with_zero_deletes: bool = True) -> list[LogEntry]:
    out: list[LogEntry] = []
    for i in range(draw(st.integers(0, 12))):
        key = draw(KEYS)
        kind = draw(
            st.sampled_from(
                ["data", "data-delete", "delete", "zero"]
                if with_zero_deletes
                else ["data", "data-delete", "delete"]
            )
        )
        ts = draw(st.integers(1, 5))
        if kind == "data":
            out.append(DataEntry({"k": key, "ts": ts, "v": f"{key}{i}"}))
        elif kind == "data-delete":
            out.append(DataEntry({"k": key, "ts": ts, "v": f"{key}{i}", "_hoodie_is_deleted": True}))
        elif kind == "delete":
            out.append(DeleteEntry(key, None, ts, "LongWrapper"))
        else:
            out.append(DeleteEntry(key, None, 0, "IntWrapper"))
    return out


BASES = st.lists(st.tuples(KEYS, st.integers(1, 5)), unique_by=lambda t: t[0]).map(
    lambda bs: [{"k": k, "ts": ts, "v": f"base-{k}"} for k, ts in bs]
)


def _blocks(entries: list[LogEntry], cuts: list[int]) -> Iterator[LogEntry]:
    """The entries delivered block by block from a lazy generator."""
    points = sorted({c % (len(entries) + 1) for c in cuts} | {0, len(entries)})
    blocks = [entries[a:b] for a, b in itertools.pairwise(points)]
    for block in blocks:
        yield from block


@settings(max_examples=300, deadline=None)
@given(BASES, log_entries(), st.lists(st.integers(0, 20), max_size=5), st.sampled_from([EV, CT]))
def test_block_split_independence(
    rows: list[dict[str, Any]], entries: list[LogEntry], cuts: list[int], ctx: MergeConfig
) -> None:
    whole = merge_file_group(rows, list(entries), ctx, key_of)
    assert merge_file_group(iter(rows), _blocks(entries, cuts), ctx, key_of) == whole


@settings(max_examples=300, deadline=None)
@given(BASES, log_entries())
def test_commit_time_is_last_write_wins(rows: list[dict[str, Any]], entries: list[LogEntry]) -> None:
    last: dict[str, LogEntry] = {}
    for entry in entries:
        last[entry.key if isinstance(entry, DeleteEntry) else entry.row["k"]] = entry
    expected = {r["k"]: r for r in rows}
    for key, entry in last.items():
        if isinstance(entry, DeleteEntry) or entry.row.get("_hoodie_is_deleted"):
            expected.pop(key, None)
        else:
            expected[key] = entry.row
    out = merge_file_group(rows, entries, CT, key_of)
    assert {r["k"]: r for r in out} == expected
    assert len(out) == len(expected)


def _event_time_oracle(base_row: dict[str, Any] | None, entries: list[LogEntry]) -> dict[str, Any] | None:
    """Spec §8.6, stated independently of the fold: cut at the last commit-time delete, drop delete
    entries until the next data row, then the row with the greatest (ordering, position) wins."""
    state: tuple[int, bool, dict[str, Any] | None] | None = None  # (ordering, is_delete, row)
    cut = max(
        (i for i, e in enumerate(entries) if isinstance(e, DeleteEntry) and e.ordering == 0), default=None
    )
    tail = entries if cut is None else entries[cut + 1 :]
    if cut is not None:
        first_data = next((i for i, e in enumerate(tail) if isinstance(e, DataEntry)), None)
        if first_data is None:
            return None
        tail = tail[first_data:]
    best: tuple[int, int] | None = None
    for pos, e in enumerate(tail):
        ts = e.ordering if isinstance(e, DeleteEntry) else e.row["ts"]
        if best is None or (ts, pos) >= best:
            best = (ts, pos)
            state = (
                ts,
                isinstance(e, DeleteEntry) or bool(e.row.get("_hoodie_is_deleted")),
                getattr(e, "row", None),
            )
    if state is None:
        return base_row
    ts, is_delete, row = state
    if base_row is not None and ts < base_row["ts"]:
        return base_row
    return None if is_delete else row


@settings(max_examples=400, deadline=None)
@given(BASES, log_entries())
def test_event_time_matches_the_vectorisable_rule(
    rows: list[dict[str, Any]], entries: list[LogEntry]
) -> None:
    out = {r["k"]: r for r in merge_file_group(rows, entries, EV, key_of)}
    by_key = {r["k"]: r for r in rows}
    for key in ("a", "b", "c"):
        mine = [e for e in entries if (e.key if isinstance(e, DeleteEntry) else e.row["k"]) == key]
        assert out.get(key) == _event_time_oracle(by_key.get(key), mine)
