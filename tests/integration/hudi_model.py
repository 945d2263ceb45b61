"""An in-memory model of Apache Hudi's write and merge semantics, independent of ``hoodie``.

It tracks, per record key, what a COW table holds after each write (merged at write time), or
what a MOR table holds (the base row and the log entries written since), and evaluates a MOR
snapshot the way Hudi 1.1's file group reader does: log entries merge among themselves first,
then the result merges with the base row.

Rules (``hudi-format.md`` §7, Hudi 1.1 ``BufferedRecordMergerFactory``):
* COMMIT_TIME_ORDERING: the later entry wins; deletes always apply.
* EVENT_TIME_ORDERING: the later entry wins if its ordering value is >= the earlier one's, or if
  either is a commit-time delete (a delete without an ordering value); a delete with an ordering
  value loses only to a strictly greater ordering value; after a commit-time delete, a later
  delete with an ordering value is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class Entry:
    """One version of a record: a row, or a delete (``row is None``) with an optional ordering value."""

    row: Row | None
    ordering: int | None  # None: a commit-time delete (or COMMIT_TIME mode)

    @property
    def is_delete(self) -> bool:
        return self.row is None

    @property
    def commit_time_delete(self) -> bool:
        return self.is_delete and self.ordering is None


def keep_newer(old: Entry, new: Entry, event_time: bool) -> bool:
    if not event_time:
        return True
    if new.commit_time_delete or old.commit_time_delete:
        return True
    return (new.ordering or 0) >= (old.ordering or 0)


def delta_merge(existing: Entry | None, new: Entry, event_time: bool) -> Entry:
    if existing is None:
        return new
    if not event_time:
        return new
    if new.is_delete:
        if existing.commit_time_delete:
            return existing
        if new.ordering is not None and (existing.ordering or 0) > new.ordering:
            return existing
        return new
    return new if keep_newer(existing, new, event_time) else existing


@dataclass
class KeyState:
    base: Row | None = None
    logs: list[Entry] = field(default_factory=list)

    def present(self) -> bool:
        """Whether Hudi's index finds the key (base file, log data or delete blocks)."""
        return self.base is not None or bool(self.logs)

    def snapshot(self, event_time: bool) -> Row | None:
        merged: Entry | None = None
        for e in self.logs:
            merged = delta_merge(merged, e, event_time)
        if merged is None:
            return self.base
        if self.base is None:
            return merged.row
        base = Entry(self.base, self.base["ts"])
        return merged.row if keep_newer(base, merged, event_time) else self.base


class TableModel:
    """The expected content of a table after a sequence of writes."""

    def __init__(self, mor: bool, event_time: bool) -> None:
        self.mor = mor
        self.event_time = event_time
        self.keys: dict[str, KeyState] = {}

    def _dedupe(self, rows: list[Row]) -> list[Row]:
        kept: dict[str, Row] = {}
        for r in rows:
            old = kept.get(r["id"])
            if old is None or not self.event_time or r["ts"] >= old["ts"]:
                kept[r["id"]] = r
        return list(kept.values())

    def insert(self, rows: list[Row]) -> None:
        """Insert of keys the table never held (no index lookup, no de-duplication)."""
        for r in rows:
            assert r["id"] not in self.keys
            self.keys[r["id"]] = KeyState(base=r)

    def upsert(self, rows: list[Row]) -> None:
        for r in self._dedupe(rows):
            state = self.keys.setdefault(r["id"], KeyState())
            if not state.present():
                state.base = r
            elif self.mor:
                state.logs.append(Entry(r, r["ts"]))
            else:
                current = state.snapshot(self.event_time)
                if current is None or keep_newer(
                    Entry(current, current["ts"]), Entry(r, r["ts"]), self.event_time
                ):
                    state.base = r

    def delete(self, rows: list[Row], with_ordering: bool) -> None:
        for r in self._dedupe(rows):
            state = self.keys.get(r["id"])
            if state is None or not state.present():
                continue
            ordering = r["ts"] if (with_ordering and self.event_time) else None
            if self.mor:
                state.logs.append(Entry(None, ordering))
            else:
                current = state.snapshot(self.event_time)
                if current is None:
                    continue
                if delta_merge(
                    Entry(current, current["ts"]), Entry(None, ordering), self.event_time
                ).is_delete:
                    self.keys[r["id"]] = KeyState()

    def snapshot(self) -> list[Row]:
        out = []
        for state in self.keys.values():
            row = state.snapshot(self.event_time)
            if row is not None:
                out.append(row)
        return sorted(out, key=lambda r: r["id"])
