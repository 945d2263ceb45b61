"""The record-merger API of Hudi 1.1 (``HoodieRecordMerger``) and its registry.

A CUSTOM-mode table names its merger by a strategy id (``hoodie.record.merge.strategy.id``).
Register an implementation under that id with :func:`register_record_merger`; the reader looks it
up with :func:`record_merger_for`. Built in are the event-time and commit-time mergers (the file
group reader uses them for ``IS_PARTIAL`` blocks) and the payload-based merger that runs the
legacy payload classes (strategy id ``00000000-0000-0000-0000-000000000000``).

Contract, as in Hudi: ``merge(older, newer, ctx)`` gets the two versions in processing order and
returns a record; a record with ``is_delete=True`` deletes the key (``BufferedRecord.delete`` makes
one without a row). Return ``older`` or ``newer`` itself when one wins unchanged. Keep the
ordering value set when the table has ordering fields, and keep ``merge`` associative.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, TypeVar

from hoodie.errors import InvalidTableConfigError, UnsupportedTableError
from hoodie.merge.config import (
    COMMIT_TIME_STRATEGY_ID,
    EVENT_TIME_STRATEGY_ID,
    PAYLOAD_BASED_STRATEGY_ID,
    MergeConfig,
)
from hoodie.merge.payloads import RecordPayload, payload_for
from hoodie.merge.records import BufferedRecord, BufferedRecordMerger, compare_ordering


class RecordMerger(ABC):
    """A merge strategy for CUSTOM tables (``HoodieRecordMerger``), identified by ``strategy_id``."""

    strategy_id: ClassVar[str]

    @abstractmethod
    def merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        """The merged record of two versions of one key (a delete record to delete it)."""

    def partial_merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        """Merge when either record may be partial (``IS_PARTIAL`` log blocks). Not supported
        unless a merger overrides it."""
        raise UnsupportedTableError(
            f"record merger {type(self).__name__} (strategy id {self.strategy_id}) does not support "
            "partial updates (IS_PARTIAL log blocks)"
        )

    def as_pre_combining_mode(self) -> RecordMerger:
        """The merger to deduplicate an incoming batch with (``asPreCombiningMode``)."""
        return self


def is_commit_time_ordering_delete(older: BufferedRecord, newer: BufferedRecord) -> bool:
    """Either record is a delete with the default ordering value (it applies unconditionally)."""
    return older.is_commit_time_delete or newer.is_commit_time_delete


def keep_values_merge(low: BufferedRecord, high: BufferedRecord) -> BufferedRecord:
    """KEEP_VALUES (``PartialMergerWithKeepValues``): the union of both records' columns, each
    taken from ``high`` when ``high`` has the column, else from ``low``. ``high`` itself when it
    already has every column. The result keeps ``high``'s key, ordering value and flags; its column
    order is ``low``'s, then columns only ``high`` has."""
    if high.values is None or low.values is None:
        return high
    high_columns = high.present_columns
    low_columns = low.present_columns
    if high.columns is None or low_columns <= high_columns:
        return high
    merged = {c: (high.values.get(c) if c in high_columns else v) for c, v in low.values.items()}
    for c in high_columns:
        if c not in merged:
            merged[c] = high.values.get(c)
    columns = None if low.columns is None else frozenset(merged)
    return BufferedRecord(high.key, merged, high.ordering, high.ordering_class, high.is_delete, columns)


class EventTimeRecordMerger(RecordMerger):
    """EVENT_TIME_ORDERING as a merger: the strictly greater older record wins, else the newer;
    commit-time deletes always win. ``partial_merge`` follows Spark's ``DefaultSparkRecordMerger``."""

    strategy_id = EVENT_TIME_STRATEGY_ID

    def merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        if is_commit_time_ordering_delete(older, newer):
            return newer
        return older if compare_ordering(older.ordering, newer.ordering) > 0 else newer

    def partial_merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        if is_commit_time_ordering_delete(older, newer):
            return newer
        either_delete = older.is_delete or newer.is_delete
        if compare_ordering(older.ordering, newer.ordering) > 0:
            return older if either_delete else keep_values_merge(low=newer, high=older)
        return newer if either_delete else keep_values_merge(low=older, high=newer)


class CommitTimeRecordMerger(RecordMerger):
    """COMMIT_TIME_ORDERING as a merger: the newer record always wins."""

    strategy_id = COMMIT_TIME_STRATEGY_ID

    def merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        return newer

    def partial_merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        if newer.is_delete:
            return newer
        return keep_values_merge(low=older, high=newer)


def _payload(ctx: MergeConfig) -> RecordPayload:
    if ctx.payload_class is None:
        raise InvalidTableConfigError(f"merge strategy id {PAYLOAD_BASED_STRATEGY_ID} needs a payload class")
    return payload_for(ctx.payload_class)


def _max_ordering_delete(older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
    winner = older if compare_ordering(older.ordering, newer.ordering) > 0 else newer
    return BufferedRecord(newer.key, None, winner.ordering, winner.ordering_class, True, None)


class PayloadRecordMerger(RecordMerger):
    """Runs the table's payload class (``HoodieAvroRecordMerger``) for both log-vs-log and
    base-vs-log merges: ``payload(newer).combineAndGetUpdateValue(older)``.

    A commit-time delete on either side wins, as does anything over a row-less older record. An
    empty result deletes: the newer record if it is a delete, else the older if it is, else a new
    delete with the greater ordering value. (0.x readers used ``preCombine`` between log records.)
    """

    strategy_id = PAYLOAD_BASED_STRATEGY_ID

    def merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        if is_commit_time_ordering_delete(older, newer):
            return newer
        payload = _payload(ctx)
        if older.values is None:
            return newer
        result = payload.combine_and_get_update_value(older.values, newer, ctx)
        if result is not None:
            if result is older.values:
                return older
            if result is newer.values:
                return newer
            return BufferedRecord.from_row(newer.key, result, ctx, is_delete=False)
        if newer.is_delete:
            return newer
        if older.is_delete:
            return older
        return _max_ordering_delete(older, newer)

    def as_pre_combining_mode(self) -> RecordMerger:
        return PreCombinePayloadRecordMerger()


class PreCombinePayloadRecordMerger(PayloadRecordMerger):
    """The payload merger in pre-combine mode (``HoodiePreCombineAvroRecordMerger``): writer-side
    deduplication with ``payload(newer).preCombine(older)``."""

    def merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        if is_commit_time_ordering_delete(older, newer):
            return newer
        return _payload(ctx).pre_combine(older, newer, ctx)

    def as_pre_combining_mode(self) -> RecordMerger:
        return self


class CustomMerger(BufferedRecordMerger):
    """CUSTOM mode: every merge, deltas and finals alike, goes to the table's record merger with
    the older record first. A delta keeps the buffered record when the merger hands its row back;
    a delete-block entry is merged as a row-less delete and stored if the merger returns anything."""

    def __init__(self, merger: RecordMerger, ctx: MergeConfig) -> None:
        self.merger = merger
        self.ctx = ctx

    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None:
        if existing is None:
            return new
        merged = self.merger.merge(existing, new, self.ctx)
        return None if merged.values is existing.values else merged

    def delta_merge_delete(
        self, delete: BufferedRecord, existing: BufferedRecord | None
    ) -> BufferedRecord | None:
        return delete if self.delta_merge(delete, existing) is not None else None

    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
        return self.merger.merge(older, newer, self.ctx)


class PartialBlockMerger(BufferedRecordMerger):
    """The merger a file group switches to once it meets an ``IS_PARTIAL`` log block: data records
    go through the record merger's ``partial_merge`` (KEEP_VALUES: absent columns keep the older
    record's values); delete-block entries keep the mode's ordinary delete rule."""

    def __init__(self, merger: RecordMerger, deletes: BufferedRecordMerger, ctx: MergeConfig) -> None:
        self.merger = merger
        self.deletes = deletes
        self.ctx = ctx

    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None:
        if existing is None:
            return new
        merged = self.merger.partial_merge(existing, new, self.ctx)
        return None if merged.values is existing.values else merged

    def delta_merge_delete(
        self, delete: BufferedRecord, existing: BufferedRecord | None
    ) -> BufferedRecord | None:
        return self.deletes.delta_merge_delete(delete, existing)

    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
        return self.merger.partial_merge(older, newer, self.ctx)


# -- registry ----------------------------------------------------------------------------------

_REGISTRY: dict[str, RecordMerger] = {}
_BUILTIN_IDS = frozenset({EVENT_TIME_STRATEGY_ID, COMMIT_TIME_STRATEGY_ID, PAYLOAD_BASED_STRATEGY_ID})
M = TypeVar("M", bound="type[RecordMerger] | RecordMerger")


def register_record_merger(merger: M, *, replace: bool = False) -> M:
    """Register a merger (a class, instantiated without arguments, or an instance) under its
    ``strategy_id``. Returns its argument, so it works as a class decorator. Registering a second
    merger for an id raises unless ``replace`` is set; the built-in ids cannot be taken over."""
    instance = merger() if isinstance(merger, type) else merger
    strategy_id = getattr(instance, "strategy_id", None)
    if not isinstance(strategy_id, str) or not strategy_id:
        raise InvalidTableConfigError(f"record merger {type(instance).__name__} has no strategy_id")
    existing = _REGISTRY.get(strategy_id)
    clash = existing is not None and type(existing) is not type(instance)
    if clash and (not replace or strategy_id in _BUILTIN_IDS):
        assert existing is not None
        raise InvalidTableConfigError(
            f"merge strategy id {strategy_id} is already registered to {type(existing).__name__}"
        )
    _REGISTRY[strategy_id] = instance
    return merger


def unregister_record_merger(strategy_id: str) -> None:
    """Remove the merger registered for ``strategy_id`` (built-ins cannot be removed)."""
    if strategy_id in _BUILTIN_IDS:
        raise InvalidTableConfigError(f"merge strategy id {strategy_id} is built in")
    _REGISTRY.pop(strategy_id, None)


def record_merger_for(strategy_id: str) -> RecordMerger:
    """The merger registered for ``strategy_id``; :class:`UnsupportedTableError` naming the id if
    there is none."""
    merger = _REGISTRY.get(strategy_id)
    if merger is None:
        raise UnsupportedTableError(
            f"no record merger is registered for merge strategy id {strategy_id!r} "
            f"(registered: {', '.join(sorted(_REGISTRY))}); register one with register_record_merger"
        )
    return merger


def registered_strategy_ids() -> frozenset[str]:
    return frozenset(_REGISTRY)


for _builtin in (EventTimeRecordMerger(), CommitTimeRecordMerger(), PayloadRecordMerger()):
    register_record_merger(_builtin)
