"""Non-blocking concurrency control (NBCC) on MERGE_ON_READ tables: two writers' delta commits
overlap in time, and compaction must take only the log files whose delta commit completed before
the compaction instant (Hudi's ``BaseHoodieCompactionPlanGenerator``: ``isCompletedBefore``, "for
both OCC and NB-CC"); a log that completes later, even before the compaction runs, belongs to the
compaction's new slice (``HoodieFileGroup.addLogFile`` slices by completion time).

Apache Hudi's NBCC writers (Flink, simple bucket index) skip the optimistic conflict check for log
appends; ``NbccWriter`` below does the same, and holds its commit until the test releases it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from hoodie.config.table_config import TableVersion
from hoodie.file_group.file_slice import FileGroupId
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import new_table, rows


class NbccWriter(HoodieWriter):
    """A writer that, like Hudi's NBCC writers, does not fail on a concurrent commit to its file
    groups, and completes only once ``release`` is set (after ``ready`` tells its files are written)."""

    def __init__(self, table: HoodieTable) -> None:
        super().__init__(table)
        self.ready = threading.Event()
        self.release = threading.Event()

    def _check_conflicts(self, *args: Any, **kwargs: Any) -> None:
        return None

    def _complete(self, *args: Any, **kwargs: Any) -> Any:
        self.ready.set()
        assert self.release.wait(60), "the test never released the writer"
        return super()._complete(*args, **kwargs)


def _values(path: Path) -> dict[str, tuple[int, str]]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return {r["id"]: (r["ts"], r["v"]) for r in data.select(["id", "ts", "v"]).to_pylist()}


@pytest.mark.parametrize(
    ("version", "metadata_table"),
    [(TableVersion.EIGHT, False), (TableVersion.EIGHT, True), (TableVersion.NINE, True)],
)
def test_compaction_takes_only_logs_completed_before_it(
    tmp_path: Path, version: TableVersion, metadata_table: bool
) -> None:
    path = tmp_path / "t"
    table = new_table(path, version=version, metadata_table=metadata_table)
    HoodieWriter(table).insert(rows(range(6), 1, partitions=1))
    group = TableReader(HoodieTable.open(str(path))).snapshot()["_hoodie_file_name"][0].as_py()
    file_id = HoodieTable.open(str(path)).file_system_view().latest_file_slices()[0].file_id
    assert group.startswith(file_id)

    # Writer A is requested first and completes last; writer B is requested after A and completes
    # while A is still in flight. Both append to the one file group.
    slow = NbccWriter(HoodieTable.open(str(path)))
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("a", slow.upsert(rows([0, 1], 5, partitions=1))), daemon=True
    )
    thread.start()
    assert slow.ready.wait(60)
    b = HoodieWriter(HoodieTable.open(str(path))).upsert(rows([0, 2], 3, partitions=1))
    pending_a = HoodieTable.open(str(path)).timeline.pending().actions(Action.DELTA_COMMIT)
    assert len(pending_a) == 1
    a_time = pending_a.instants[0].requested_time
    assert a_time < b.instant.requested_time  # requested before B, completes after it

    # Compaction scheduled while A is in flight: only B's log is in the plan.
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    compaction_time = scheduled.instant_time
    plan = HoodieTable.open(str(path)).compaction_plan(compaction_time)
    (op,) = plan.operations or []
    assert [n.split("_")[1].split(".")[0] for n in op.delta_file_paths or []] == [b.instant.requested_time]

    # A completes after the compaction was scheduled but before it runs: still not in the plan;
    # its log belongs to the compaction's new slice.
    slow.release.set()
    thread.join(60)
    assert "a" in result, "writer A failed"
    after = HoodieTable.open(str(path))
    a_done = after.timeline.get(a_time, Action.DELTA_COMMIT)
    assert a_done is not None and a_done.completion_time is not None
    assert a_done.completion_time > compaction_time
    execute_compaction(ServiceContext(after), compaction_time, LocalRunner())

    done = HoodieTable.open(str(path))
    (latest,) = done.file_system_view().latest_file_slices()
    assert latest.group_id == FileGroupId("p0", file_id)
    assert latest.base_instant_time == compaction_time
    assert [lf.instant_time for lf in latest.log_files] == [a_time]
    # Merged by the ordering field: A's ts=5 wins over B's ts=3 although B completed first.
    assert _values(path) == {
        "k0": (5, "v0@5"),
        "k1": (5, "v1@5"),
        "k2": (3, "v2@3"),
        "k3": (1, "v3@1"),
        "k4": (1, "v4@1"),
        "k5": (1, "v5@1"),
    }
    assert len(hudi_rs_rows(path)) == 6
    # The compacted base file holds B's change and not A's: read-optimized shows exactly that.
    ro = TableReader(done).read_optimized()
    assert {r["id"]: r["ts"] for r in ro.select(["id", "ts"]).to_pylist()} == {
        "k0": 3,
        "k1": 1,
        "k2": 3,
        "k3": 1,
        "k4": 1,
        "k5": 1,
    }
