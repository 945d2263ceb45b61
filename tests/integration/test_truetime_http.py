"""The ``hoodie`` writer taking its instant times from the daemon's TrueTime over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoodie.table import HoodieTable
from hoodie.transaction.lock import LockError
from hoodie.transaction.time_generator import HttpTimeSource
from hoodie.write.writer import HoodieWriter
from tests.daemon.helpers import ServeProcess, mor_table
from tests.tables import rows, snapshot

TOKEN = "truetime-admin-token-0123"


def test_writer_uses_the_daemons_truetime(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    daemon = ServeProcess(tmp_path, "tt", api={"tokens": [{"token": TOKEN, "scope": "admin"}]}).start()
    try:
        url = f"http://127.0.0.1:{daemon.port}"
        source = HttpTimeSource(url, "t", token=TOKEN)
        writer = HoodieWriter(HoodieTable.open(str(path)), time_source=source)
        first = writer.upsert(rows([1, 2], 7)).instant
        second = writer.upsert(rows([3], 8)).instant
        assert first.requested_time < (first.completion_time or "") < second.requested_time
        assert second.completion_time is not None and second.requested_time < second.completion_time
        mark = json.loads((path / ".hoodie" / ".aux" / "hts" / "truetime").read_text())
        assert mark["instant"] == second.completion_time, "the last time issued was the last completion"
        assert any("'ts': 8" in r for r in snapshot(path))
        with pytest.raises(LockError, match="answered 401"):
            HttpTimeSource(url, "t", token="not-the-token-at-all").new_instant_time()
        with pytest.raises(LockError, match="answered 404"):
            HttpTimeSource(url, "nope", token=TOKEN).new_instant_time()
    finally:
        daemon.stop()
    with pytest.raises(LockError, match="unreachable"):
        HttpTimeSource(url, "t", token=TOKEN, timeout_s=2).new_instant_time()
