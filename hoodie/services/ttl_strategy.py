"""Partition TTL rules: which partitions have expired, as Apache Hudi's partition TTL strategies decide.

Hudi's keys (``HoodieTTLConfig``) and its two shipped strategies (``PartitionTTLStrategyType``):

- ``KEEP_BY_TIME`` (``KeepByTimeStrategy``, the default): a partition's age is the newest base
  instant time of its latest file slices at or before the TTL instant, pending-compaction slices
  included and replaced file groups excluded (``getLatestFileSlicesBeforeOrOn(p, instant, true)``);
  a partition without such a slice is never expired.
- ``KEEP_BY_CREATION_TIME`` (``KeepByCreationTimeStrategy``): a partition's age is the
  ``commitTime`` of its ``.hoodie_partition_metadata`` (``readPartitionCreatedCommitTime``); a
  partition without one is never expired.

A partition is expired when its reference time plus ``days.retain`` days is earlier than the TTL
instant's time (``isPartitionExpired``: ``instantTimePlusMillis`` compared as instant strings).
Nothing expires when ``days.retain`` is not positive, the timeline has no completed instant, or the
table's properties have no ``hoodie.table.partition.fields``. The candidates are the partitions named
by ``partition.selected`` (split on commas, as Java's ``String.split``), else every partition of the
table (from the metadata table's ``files`` partition when it has one); at most
``max.delete.partitions`` of the expired ones are deleted in one commit: for KEEP_BY_TIME the first in
the order of the Java ``HashMap`` the strategy collects them into, for KEEP_BY_CREATION_TIME the first
in listing order (Hudi's listing order is not fixed; hts lists partitions sorted).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import pyarrow.parquet as pq

from hoodie.config.table_config import TableKeys
from hoodie.errors import InvalidInputError, UnsupportedTableError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.file_group.view import FileSystemView
from hoodie.index.java_hash import java_string_hash
from hoodie.io.fileio import join
from hoodie.table import HoodieTable
from hoodie.timeline.instant_time import MILLIS_FORMAT_LENGTH, normalize
from hoodie.timeline.timeline import ActiveTimeline

INLINE_KEY = "hoodie.partition.ttl.inline"
STRATEGY_CLASS_KEY = "hoodie.partition.ttl.strategy.class"
STRATEGY_TYPE_KEY = "hoodie.partition.ttl.management.strategy.type"
DAYS_RETAIN_KEY = "hoodie.partition.ttl.strategy.days.retain"
PARTITION_SELECTED_KEY = "hoodie.partition.ttl.strategy.partition.selected"
MAX_DELETE_PARTITIONS_KEY = "hoodie.partition.ttl.strategy.max.delete.partitions"
KEYS = (INLINE_KEY, STRATEGY_CLASS_KEY, STRATEGY_TYPE_KEY, DAYS_RETAIN_KEY, PARTITION_SELECTED_KEY,
        MAX_DELETE_PARTITIONS_KEY)  # fmt: skip
"""``HoodieTTLConfig``'s keys, with its defaults below."""

DEFAULT_DAYS_RETAIN = -1
DEFAULT_MAX_DELETE_PARTITIONS = 1000
PARTITION_FIELDS_KEY = "hoodie.table.partition.fields"
PARTITION_METAFILE = ".hoodie_partition_metadata"
_DAY_MS = 24 * 3600 * 1000


class TTLStrategyType(StrEnum):
    """``PartitionTTLStrategyType``, with the strategy class each type names."""

    KEEP_BY_TIME = "KEEP_BY_TIME"
    KEEP_BY_CREATION_TIME = "KEEP_BY_CREATION_TIME"

    @property
    def class_name(self) -> str:
        return _CLASSES[self]


_PACKAGE = "org.apache.hudi.table.action.ttl.strategy."
_CLASSES = {
    TTLStrategyType.KEEP_BY_TIME: _PACKAGE + "KeepByTimeStrategy",
    TTLStrategyType.KEEP_BY_CREATION_TIME: _PACKAGE + "KeepByCreationTimeStrategy",
}


def _int(options: Mapping[str, str], key: str, default: int) -> int:
    raw = options.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidInputError(f"{key}={raw!r} is not an integer") from None


def _bool(options: Mapping[str, str], key: str) -> bool:
    """Hudi reads booleans with ``Boolean.parseBoolean``: only ``true`` (any case) is true."""
    raw = options.get(key)
    return raw is not None and raw.lower() == "true"


def _java_split(value: str) -> list[str]:
    """``String.split(",")``: trailing empty strings dropped, inner ones kept."""
    parts = value.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class TTLConfig:
    """``HoodieTTLConfig`` read from Hudi keys."""

    strategy: TTLStrategyType = TTLStrategyType.KEEP_BY_TIME
    days_retain: int = DEFAULT_DAYS_RETAIN
    partition_selected: tuple[str, ...] | None = None
    max_delete_partitions: int = DEFAULT_MAX_DELETE_PARTITIONS
    inline: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> TTLConfig:
        """The configuration the options name; a clear error naming a key whose value Hudi rejects or
        whose strategy hts cannot run (``HoodiePartitionTTLStrategyFactory``: the class key wins over
        the type key)."""
        class_name = (options.get(STRATEGY_CLASS_KEY) or "").strip()
        if class_name:
            found = next((t for t in TTLStrategyType if t.class_name == class_name), None)
            if found is None:
                raise InvalidInputError(
                    f"{STRATEGY_CLASS_KEY}={class_name!r}: hts runs Hudi's own partition TTL strategies only "
                    f"({', '.join(t.class_name for t in TTLStrategyType)}); a custom strategy class is "
                    "Java code hts cannot run. Nothing was written."
                )
            strategy = found
        else:
            raw = options.get(STRATEGY_TYPE_KEY, TTLStrategyType.KEEP_BY_TIME.value)
            try:
                strategy = TTLStrategyType(raw.strip().upper())
            except ValueError:
                raise InvalidInputError(
                    f"{STRATEGY_TYPE_KEY}={raw!r}: unsupported partition TTL strategy type "
                    f"(Hudi's types: {', '.join(TTLStrategyType)})"
                ) from None
        selected = options.get(PARTITION_SELECTED_KEY)
        chosen = tuple(_java_split(selected)) if selected else None
        if chosen is not None and len(set(chosen)) != len(chosen):
            # KeepByTimeStrategy collects the partitions into a map (Collectors.toMap), which fails on a
            # duplicate key.
            dupes = sorted({p for p in chosen if chosen.count(p) > 1})
            raise InvalidInputError(
                f"{PARTITION_SELECTED_KEY}={selected!r} names partition(s) {dupes} more than once"
            )
        limit = _int(options, MAX_DELETE_PARTITIONS_KEY, DEFAULT_MAX_DELETE_PARTITIONS)
        if limit < 0:  # Stream.limit refuses a negative size
            raise InvalidInputError(f"{MAX_DELETE_PARTITIONS_KEY}={limit} must not be negative")
        return cls(
            strategy=strategy,
            days_retain=_int(options, DAYS_RETAIN_KEY, DEFAULT_DAYS_RETAIN),
            partition_selected=chosen,
            max_delete_partitions=limit,
            inline=_bool(options, INLINE_KEY),
        )

    @property
    def ttl_ms(self) -> int:
        return self.days_retain * _DAY_MS


# -- instant arithmetic (HoodieInstantTimeGenerator) ----------------------------------------------


def _fix(instant_time: str) -> str:
    """``fixInstantTimeCompatibility``: seconds get ``999`` millis; longer ids keep 17 digits."""
    norm = normalize(instant_time)
    return norm[:MILLIS_FORMAT_LENGTH] if len(norm) > MILLIS_FORMAT_LENGTH else norm


def instant_time_plus_millis(instant_time: str, millis: int, tz: dt.tzinfo) -> str:
    """``instantTimePlusMillis``: the wall-clock time ``millis`` later, in the timeline's zone (UTC,
    or the machine's zone for LOCAL), as a 17-digit instant; a numeric id that is no date is added
    to as a number, as Hudi does."""
    fixed = _fix(instant_time)
    try:
        local = dt.datetime.strptime(fixed[:14], "%Y%m%d%H%M%S").replace(microsecond=int(fixed[14:]) * 1000)
        if len(fixed) != MILLIS_FORMAT_LENGTH or not fixed.isdigit():
            raise ValueError(fixed)
    except ValueError:
        if instant_time.isdigit():
            return f"{int(instant_time) + millis:0{MILLIS_FORMAT_LENGTH}d}"
        raise InvalidInputError(f"invalid instant time {instant_time!r}") from None
    if tz is dt.UTC:
        moment = local.replace(tzinfo=dt.UTC) + dt.timedelta(milliseconds=millis)
        out = moment
    else:  # ZoneId.systemDefault(): the machine's zone, daylight saving included
        moment = local.astimezone(dt.UTC) + dt.timedelta(milliseconds=millis)
        out = moment.astimezone()
    return out.strftime("%Y%m%d%H%M%S") + f"{out.microsecond // 1000:03d}"


def is_expired(reference_time: str, ttl_ms: int, instant_time: str, tz: dt.tzinfo) -> tuple[bool, str]:
    """``isPartitionExpired``: (expired, the instant it expires at)."""
    expires_at = instant_time_plus_millis(reference_time, ttl_ms, tz)
    return _fix(instant_time) > expires_at, expires_at


# -- Java's HashMap order ----------------------------------------------------------------------------


def java_hash_map_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` the keys were put into in this order (the map
    ``KeepByTimeStrategy`` collects last commit times into, whose order its limit then follows):
    by bucket (the spread hash masked by the table size), then insertion order within a bucket.
    Buckets that turn into trees (8+ keys in one bucket of a table of 64+) are not modelled."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF  # as Java's >>> sees it
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, k in sorted(enumerate(keys), key=lambda item: (bucket(item[1]), item[0]))]


# -- the strategies --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiredPartition:
    """A partition the strategy found expired, with why."""

    partition: str
    reference_time: str
    """Its last commit time (KEEP_BY_TIME) or creation time (KEEP_BY_CREATION_TIME)."""
    expires_at: str

    def why(self, strategy: TTLStrategyType) -> str:
        what = "created at" if strategy is TTLStrategyType.KEEP_BY_CREATION_TIME else "last written at"
        return f"{self.partition or '(root)'}: {what} {self.reference_time}, expired at {self.expires_at}"


def partition_created_time(table: HoodieTable, partition: str) -> str | None:
    """``readPartitionCreatedCommitTime``: ``commitTime`` of the partition's metadata file (the text
    properties file, or the Parquet variant's footer), None when it has none."""
    folder = join(table.base_path, partition) if partition else table.base_path
    path = join(folder, PARTITION_METAFILE)
    if table.fileio.exists(path):
        for raw in table.fileio.read_bytes(path).decode("utf-8", "replace").splitlines():
            line = raw.strip()
            if line.startswith(("#", "!")) or not line:
                continue
            key, sep, value = line.partition("=")
            if sep and key.strip() == "commitTime":
                return value.strip()
        return None
    parquet = path + ".parquet"
    if table.fileio.exists(parquet):
        with table.fileio.open_input(parquet) as f:
            meta: dict[bytes, bytes] = pq.read_metadata(f).metadata or {}
        created = meta.get(b"commitTime")
        return created.decode() if created is not None else None
    return None


def last_commit_time(
    view: FileSystemView, partition: str, instant_time: str, pending_compactions: Mapping[FileGroupId, str]
) -> str | None:
    """The newest base instant time of ``partition``'s latest file slices at or before ``instant_time``
    (pending compactions' slices included, replaced file groups not), None when there are none."""
    newest: str | None = None
    bound = normalize(instant_time)
    for fg in view.file_groups(partition):
        if view.is_replaced(fg.group_id):
            continue
        pending = pending_compactions.get(fg.group_id)
        for key in fg.slice_keys_desc():
            if normalize(key) > bound or not (view.is_committed(key) or key == pending):
                continue
            if newest is None or normalize(key) > normalize(newest):
                newest = key
            break
    return newest


def require_partitioned(table: HoodieTable) -> bool:
    """Whether the strategies run at all (``getPartitionFields().isPresent()``: HoodieTableConfig returns
    an empty array, present, when the key is there with no field); a non-partitioned
    table whose properties carry the key with no field is refused (Hudi would treat its root as one
    partition and could delete every file group of the table)."""
    raw = TableKeys.PARTITION_FIELDS.lookup(table.config.props)
    if raw is None:
        return False
    if not [f for f in raw.split(",") if f]:
        raise UnsupportedTableError(
            f"{table.base_path}: partition TTL on a non-partitioned table ({PARTITION_FIELDS_KEY}={raw!r}) "
            "is refused: Hudi's strategies would take the table root as one partition and replace every "
            "file group of the table. Nothing was written."
        )
    return True


def expired_partitions(
    table: HoodieTable,
    timeline: ActiveTimeline,
    view: FileSystemView,
    config: TTLConfig,
    instant_time: str,
) -> tuple[list[ExpiredPartition], int]:
    """The partitions to delete at ``instant_time`` (at most ``max.delete.partitions``), and how many
    expired in all."""
    if config.ttl_ms <= 0 or not any(i.is_completed for i in timeline) or not require_partitioned(table):
        return [], 0
    if config.partition_selected is not None:
        candidates = list(config.partition_selected)
    else:
        candidates = list(view.partitions())
    tz = table.tz
    expired: list[ExpiredPartition] = []
    if config.strategy is TTLStrategyType.KEEP_BY_TIME:
        pending = table.pending_compaction_operations(timeline)
        for partition in java_hash_map_order(candidates):
            last = last_commit_time(view, partition, instant_time, pending)
            if last is None:
                continue
            done, expires_at = is_expired(last, config.ttl_ms, instant_time, tz)
            if done:
                expired.append(ExpiredPartition(partition, last, expires_at))
    else:
        for partition in candidates:
            created = partition_created_time(table, partition)
            if created is None:
                continue
            done, expires_at = is_expired(created, config.ttl_ms, instant_time, tz)
            if done:
                expired.append(ExpiredPartition(partition, created, expires_at))
    return expired[: config.max_delete_partitions], len(expired)
