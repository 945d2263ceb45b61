"""Logs as JSON lines: time, level, logger, message, and the table, service, instant and run they
concern (passed as ``extra={"table": ..., "service": ..., "instant": ..., "run": ...}``)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

FIELDS = ("table", "service", "instant", "run", "trigger", "decision", "root")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure(fmt: str = "json", level: str = "INFO") -> None:
    """Send every log record to stderr as JSON lines (or plain text)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("py4j", "kazoo.client", "apscheduler", "botocore", "urllib3", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
