"""When a compaction task's log records spill to disk: Hudi's memory budget (``HoodieMemoryConfig``)
and where the spill files go. :mod:`hoodie.read.spill` carries out the spilled merge."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoodie.errors import TableServiceError
from hoodie.read.slice_reader import SliceReadOptions

# HoodieMemoryConfig's keys and defaults (hudi-client-common, org.apache.hudi.config).
MAX_SIZE_KEY = "hoodie.memory.compaction.max.size"
FRACTION_KEY = "hoodie.memory.compaction.fraction"
SPILL_PATH_KEY = "hoodie.memory.spillable.map.path"
#: DEFAULT_MAX_MEMORY_FOR_SPILLABLE_MAP_IN_BYTES: Hudi's budget when no Spark executor memory is known
#: (IOUtils.getMaxMemoryAllowedForMerge); hts never knows the executor's heap, so this is the default.
DEFAULT_MAX_SIZE = 1024 * 1024 * 1024
#: DEFAULT_MIN_MEMORY_FOR_SPILLABLE_MAP_IN_BYTES: Hudi's floor for a derived budget.
MIN_DERIVED_SIZE = 100 * 1024 * 1024
DEFAULT_FRACTION = 0.6
#: Arrow bytes the in-memory path holds per byte of log file: the raw blocks, their decoded
#: tables and the concatenated copy of the log rows (measured on the bench's Avro blocks).
IN_MEMORY_FACTOR = 4
MAX_BUCKETS = 128
#: Share of the budget the process's resident memory may reach before the spill path hands the Arrow
#: pool's freed pages back to the OS: below it they are reused (no page faults, no zeroing).
RELEASE_SHARE = 0.85
_TASK_FIELD = "memory_budget"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """How much memory a compaction task's log records may take before they spill, and where to."""

    max_size: int = DEFAULT_MAX_SIZE
    spill_path: str | None = None  # None: the system's temporary directory

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> MemoryBudget:
        """Hudi's keys: ``hoodie.memory.compaction.max.size`` (bytes) wins; otherwise Hudi derives
        the size from the Spark executor's heap times ``hoodie.memory.compaction.fraction``,
        which hts cannot see: it validates the fraction and uses Hudi's no-Spark default, 1 GiB."""
        raw = options.get(MAX_SIZE_KEY)
        fraction = options.get(FRACTION_KEY)
        if fraction is not None:
            try:
                value = float(fraction)
            except ValueError:
                value = math.nan
            if not 0 < value <= 1:
                raise TableServiceError(f"{FRACTION_KEY}={fraction!r} is not a fraction in (0, 1]")
        size = DEFAULT_MAX_SIZE
        if raw is not None:
            try:
                size = int(raw)
            except ValueError:
                size = -1
            if size <= 0:
                raise TableServiceError(f"{MAX_SIZE_KEY}={raw!r} is not a positive number of bytes")
        path = options.get(SPILL_PATH_KEY)
        if path is not None and not Path(path).is_dir():
            raise TableServiceError(f"{SPILL_PATH_KEY}={path!r} is not a local directory")
        return cls(size, path)

    def over_release_share(self) -> bool:
        """Whether this process's resident memory is above :data:`RELEASE_SHARE` of the budget
        (True where the platform does not say: then freed memory is always released)."""
        resident = resident_bytes()
        return resident is None or resident > self.max_size * RELEASE_SHARE

    def to_task(self) -> dict[str, Any]:
        return {_TASK_FIELD: {"max_size": self.max_size, "spill_path": self.spill_path}}

    @classmethod
    def of_task(cls, task: Mapping[str, Any]) -> MemoryBudget:
        raw = task.get(_TASK_FIELD)
        return cls(int(raw["max_size"]), raw.get("spill_path")) if raw else cls()


def resident_bytes() -> int | None:
    """This process's resident set size now (Linux ``/proc/self/statm``), else None."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def spills(opts: SliceReadOptions, log_bytes: int, budget: MemoryBudget, *, cdc: bool) -> bool:
    """Whether a slice with ``log_bytes`` of log files takes the spill path under ``budget``."""
    if cdc or not opts.vectorized:
        return False  # the before images (CDC) and the per-record engine stay in memory
    return log_bytes * IN_MEMORY_FACTOR > budget.max_size
