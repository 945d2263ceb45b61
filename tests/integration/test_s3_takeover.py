"""A compaction taken over on S3: executor A stalls, B finds its heartbeat gone, rolls A's attempt
back and completes the plan; A is refused, deletes only its own objects, and hudi-rs reads B's result.

S3 is moto's standalone server, an emulator of the S3 API (:mod:`tests.servers.s3`), behind the
project's proxy adding 20 ms per request.
"""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.errors import InstantTakenOverError
from hoodie.services.base import ExecutionResult, LocalRunner, ServiceContext
from hoodie.services.claim import NotTakenOver
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from tests.servers.s3 import SlowS3, hudi_rs_options
from tests.services.test_takeover import Pausing
from tests.tables import new_table, rows

_names = itertools.count()


def _read(uri: str, options: dict[str, str]) -> list[dict[str, Any]]:
    builder = HudiTableBuilder.from_base_uri(uri).with_storage_options(hudi_rs_options(options))
    data = pa.Table.from_batches(builder.build().read())
    return sorted(data.select(["id", "ts", "v", "p"]).to_pylist(), key=lambda r: str(r["id"]))


def _objects(table: HoodieTable, ts: str) -> set[str]:
    """Data objects named with ``ts``, relative to the table."""
    base = table.base_path.rstrip("/") + "/"
    found = table.fileio.list_files_recursive(table.base_path)
    return {f.path[len(base) :] for f in found if ts in f.name and "/.hoodie/" not in f.path}


def test_a_compaction_taken_over_on_s3_is_refused_and_removes_only_its_objects(slow_s3: SlowS3) -> None:
    uri = f"s3://lake/takeover/t{next(_names)}"
    direct, slow = slow_s3.direct.storage_options(), slow_s3.endpoint.storage_options()
    writer = HoodieWriter(new_table(uri, metadata_table=False, **direct))  # fewer requests: no metadata table
    writer.insert(rows(range(18), 1))
    writer.upsert(rows(range(0, 18, 2), 2))
    expected = _read(uri, direct)
    scheduled = schedule_compaction(ServiceContext(HoodieTable.open(uri, **direct)), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time

    def context() -> ServiceContext:
        return ServiceContext(HoodieTable.open(uri, **slow), storage_options=slow)

    a = context()
    b_done: list[ExecutionResult] = []

    def b_takes_over() -> None:
        check = a.claim_checks[ts]
        assert isinstance(check, NotTakenOver)
        check.claim.heartbeat.stop()  # A's beats stop and its heartbeat object goes: expired for B
        b_done.append(execute_compaction(context(), ts, LocalRunner()))

    with pytest.raises(
        InstantTakenOverError, match=rf"compaction {ts} on lake/takeover/t\d+ was taken over: rollback"
    ) as e:
        execute_compaction(a, ts, Pausing(b_takes_over))
    (done,) = b_done
    table = HoodieTable.open(uri, **slow)
    assert table.reload().get(ts) == done.instant and done.instant.action is Action.COMMIT
    (rollback,) = table.reload().actions(Action.ROLLBACK)
    assert e.value.rollback == rollback.requested_time
    written = {s.path for s in table.commit_metadata(done.instant).write_stats()}
    assert len(written) == 3 and _objects(table, ts) == written, "only B's objects carry the instant"
    assert _read(uri, slow) == expected
