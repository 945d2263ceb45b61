"""schemathesis over the daemon's OpenAPI, against ``hts serve`` serving a real table.

Every operation, every check (``--checks all``), a fixed seed, with an admin token so that triggers,
cancels and pauses run for real. The daemon runs with its working folder, ``HOME`` and ``TMPDIR``
inside the campaign's folder, next to its tables and run history: whatever a fuzzed request
makes it write stays there. ``tests/daemon/test_api_contract.py`` runs a campaign in
``make test``; ``make fuzz`` runs a longer one (``python -m tests.daemon.contract --help``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.daemon.helpers import ServeProcess, mor_table, wait_for

ADMIN = "contract-admin-token-0123456789"
CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = 15


@dataclass
class Campaign:
    returncode: int
    output: str
    report: dict[str, Any]
    table: Path
    confined: Path
    """The daemon's working folder, HOME and TMPDIR."""
    seconds: float

    @property
    def cases(self) -> int:
        return int(self.report["test_cases"]["generated"])

    def summary(self) -> str:
        start = self.output.find("=== SUMMARY ===")
        return self.output[start:] if start >= 0 else self.output[-4000:]


def run_campaign(
    root: Path, *, examples: int, seed: int = SEED, max_time_s: float | None = None, timeout_s: float = 900
) -> Campaign:
    """Serve a MERGE_ON_READ table under ``root`` and run schemathesis against it."""
    table = root / "tables" / "t"
    mor_table(table)
    confined = root / "cwd"
    confined.mkdir()
    inside = {"HOME": str(confined), "TMPDIR": str(confined)}
    tokens = [{"token": ADMIN, "scope": "admin", "name": "contract"}]
    daemon = ServeProcess(root, "contract", env=inside, cwd=confined, api={"tokens": tokens}).start()
    report = root / "schemathesis.json"
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(CONFIG),
        "--no-color",
        "run",
        f"http://127.0.0.1:{daemon.port}/openapi.json",
        "--checks",
        "all",
        "--seed",
        str(seed),
        "--max-examples",
        str(examples),
        "--header",
        f"Authorization: Bearer {ADMIN}",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        *(["--max-time", str(int(max_time_s))] if max_time_s is not None else []),
    ]
    started = time.monotonic()
    try:
        wait_for(lambda: daemon.request("GET", "/readyz") == {"ready": True}, 60, "the daemon to be ready")
        result = subprocess.run(
            command,
            cwd=root,
            env={**os.environ, **inside},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    finally:
        daemon.stop()
    output = result.stdout + result.stderr
    if not report.exists():
        raise AssertionError(f"schemathesis wrote no report (exit {result.returncode}):\n{output[-8000:]}")
    return Campaign(
        result.returncode,
        output,
        json.loads(report.read_text()),
        table,
        confined,
        time.monotonic() - started,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A schemathesis campaign against hts serve.")
    parser.add_argument("--examples", type=int, default=1000, help="cases per operation and phase")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--max-time", type=float, default=None, help="seconds for the whole campaign")
    parser.add_argument("--dir", type=Path, default=None, help="where the table and reports go")
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="hts-fuzz-"))
    root.mkdir(parents=True, exist_ok=True)
    campaign = run_campaign(
        root, examples=args.examples, seed=args.seed, max_time_s=args.max_time, timeout_s=24 * 3600
    )
    print(campaign.summary())
    print(f"{campaign.cases} cases in {campaign.seconds:.0f} s; table, logs and report in {root}")
    return campaign.returncode


if __name__ == "__main__":
    sys.exit(main())
