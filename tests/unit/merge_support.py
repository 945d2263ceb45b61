"""What the merge tests share (``test_merge_*.py``): the merge modes and configs, Hudi's merge keys, and
base rows, log entries and a file group merged from them.
"""

from __future__ import annotations

from typing import Any

from hoodie.config.table_config import RecordMergeMode, TableConfig
from hoodie.merge.buffer import merge_file_group
from hoodie.merge.config import MergeConfig, OrderingClass
from hoodie.merge.records import DataEntry, DeleteEntry, LogEntry

EVENT = RecordMergeMode.EVENT_TIME_ORDERING
COMMIT = RecordMergeMode.COMMIT_TIME_ORDERING
CUSTOM = RecordMergeMode.CUSTOM

# An EVENT_TIME table ordered by a long column ``ts``.
EV = MergeConfig(EVENT, ("ts",), ordering_types={"ts": OrderingClass.LONG})
MODE_KEY = "hoodie.record.merge.mode"
STRATEGY_KEY = "hoodie.record.merge.strategy.id"
PAYLOAD_KEY = "hoodie.compaction.payload.class"
CT = MergeConfig(COMMIT)


def key_of(row: dict[str, Any]) -> str:
    return str(row["k"])


def base(ts: int | None, k: str = "a", **extra: Any) -> dict[str, Any]:
    return {"k": k, "ts": ts, "v": "base", **extra}


def upd(ts: int | None, k: str = "a", **extra: Any) -> DataEntry:
    return DataEntry({"k": k, "ts": ts, "v": f"u{ts}", **extra})


def dele(ts: Any, wrapper: str | None = "LongWrapper", k: str = "a") -> DeleteEntry:
    return DeleteEntry(k, "p", ts, wrapper)


def merged_values(rows: list[dict[str, Any]], logs: list[LogEntry], ctx: MergeConfig = EV) -> list[str]:
    return [r["v"] for r in merge_file_group(rows, logs, ctx, key_of)]


def table_config(version: int, **props: str) -> TableConfig:
    return TableConfig.from_properties(
        {"hoodie.table.name": "t", "hoodie.table.version": str(version), **props}
    )
