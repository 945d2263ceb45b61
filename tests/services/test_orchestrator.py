"""The orchestrator the CLI and the daemon share: schedule, execute, run and trigger on real tables."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import InvalidInputError
from hoodie.services import orchestrator
from hoodie.services.base import LocalRunner, Runner
from hoodie.services.registry import ServiceKind
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.lock import InProcessLockProvider
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from service import cli
from tests.tables import new_table, rows

COMPACT_NOW = {"hoodie.compact.inline.max.delta.commits": "1"}


def _runner() -> Runner:
    return LocalRunner()


def _table(path: Path) -> HoodieTable:
    table = new_table(path, table_type=TableType.MERGE_ON_READ, version=TableVersion.EIGHT)
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(0, 30, 3), 2))
    return HoodieTable.open(str(path))


def test_the_lock_wait_is_hudis_key() -> None:
    assert orchestrator.lock_wait_s({}) == 60.0
    assert orchestrator.lock_wait_s({"hoodie.write.lock.wait_time_ms": "1500"}) == 1.5
    for bad in ("soon", "-1"):
        with pytest.raises(InvalidInputError, match=rf"hoodie.write.lock.wait_time_ms='{bad}'"):
            orchestrator.lock_wait_s({"hoodie.write.lock.wait_time_ms": bad})


def test_the_cli_waits_for_the_lock_as_long_as_hoodie_write_lock_wait_time_ms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t"
    table = _table(path)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        lock = InProcessLockProvider(table.base_path)
        lock.acquire()
        held.set()
        release.wait(30)
        lock.release()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(5)
        started = time.monotonic()
        wait = ["--option", "hoodie.write.lock.wait_time_ms=300", "--spark-master", "in-process"]
        code = cli.main(
            [
                "run",
                "compaction",
                str(path),
                *[a for kv in COMPACT_NOW.items() for a in ("--option", "=".join(kv))],
                *wait,
            ]
        )
        took = time.monotonic() - started
    finally:
        release.set()
        holder.join()
    assert code == 2 and took < 10
    assert "timed out after 0.3s" in capsys.readouterr().err
    assert HoodieTable.open(str(path)).reload().pending_compaction().first() is None  # nothing written


def test_the_cli_opens_the_table_once_per_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _table(path)
    opened: list[str] = []
    real = HoodieTable.open.__func__  # type: ignore[attr-defined]

    def counting(cls: type[HoodieTable], uri: str, **storage: Any) -> HoodieTable:
        if sys._getframe(1).f_code.co_name != "open_table_for_task":  # tasks open it once per executor
            opened.append(uri)
        table: HoodieTable = real(cls, uri, **storage)
        return table

    monkeypatch.setattr(HoodieTable, "open", classmethod(counting))
    options = ["--option", "hoodie.compact.inline.max.delta.commits=1", "--spark-master", "in-process"]
    assert cli.main(["run", "compaction", str(path), *options]) == 0
    assert opened == [str(path)]
    monkeypatch.undo()
    assert HoodieTable.open(str(path)).reload().completed().actions(Action.COMMIT).last() is not None


def test_run_savepoint_creates_it_and_has_nothing_to_execute(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    assert cli.main(["run", "savepoint", str(path), "--spark-master", "in-process"]) == 0
    savepoints = HoodieTable.open(str(path)).reload().actions(Action.SAVEPOINT)
    assert [i.is_completed for i in savepoints] == [True]


def test_a_trigger_runs_only_the_plan_it_claims(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    ctx = orchestrator.service_context(table, COMPACT_NOW)
    planned = orchestrator.schedule(ctx, ServiceKind.COMPACTION).scheduled_instant
    assert planned is not None
    # Another run holds that plan and nothing else is due: the trigger runs nothing.
    elsewhere = orchestrator.trigger(ctx, ServiceKind.COMPACTION, _runner, claim=lambda ts: "run 7")
    assert elsewhere.executed == [] and elsewhere.scheduled_instant is None
    assert elsewhere.note == "nothing to plan; the pending plans are run by run 7"
    claims: list[str] = []
    mine = orchestrator.trigger(ctx, ServiceKind.COMPACTION, _runner, claim=claims.append)
    assert claims == [planned]
    (result,) = mine.executed
    assert result.instant.requested_time == planned and result.instant.is_completed
    again = orchestrator.run(ctx, ServiceKind.COMPACTION, _runner)
    assert again.scheduled_instant is None and again.executed == []


def test_run_of_a_service_that_plans_nothing_on_the_timeline_executes_its_plan(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    ctx = orchestrator.service_context(table, {})
    done = orchestrator.run(ctx, ServiceKind.ARCHIVAL, _runner)
    assert done.scheduled_instant is None and done.executed == [] and done.note == "nothing due"
