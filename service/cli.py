"""The ``hts`` command line.

``hts serve`` runs the daemon; ``hts request`` leaves a plan for it and exits; ``hts schedule``,
``hts execute`` and ``hts run`` run a table service once; ``hts read``, ``hts write`` and
``hts timeline`` work on one table with the format core; ``hts quickstart`` writes a demo table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from hoodie.cdc.reader import read_cdc
from hoodie.config.table_config import RecordMergeMode, TableType, TableVersion
from hoodie.errors import HoodieError
from hoodie.read.reader import TableReader
from hoodie.services import registry
from hoodie.shape.table_shape import TableShape
from hoodie.table import HoodieTable
from hoodie.write.bucket_planner import check_bucket_options
from hoodie.write.create import create_table
from hoodie.write.options import LogBlockFormat, WriteOperation, WriteOptions
from hoodie.write.writer import HoodieWriter
from service.errors import ServiceError

if TYPE_CHECKING:
    from service.settings import Settings

log = logging.getLogger("hts")


class UsageError(Exception):
    """A command-line mistake; the message says what to change."""


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _options(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_read(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    table.shape().check("read")
    if args.cdc or args.cdc_from_compaction:
        return _read_cdc(table, args)
    reader = TableReader(table)
    if args.begin_instant is not None or args.end_instant is not None:
        if args.as_of or args.read_optimized:
            raise UsageError(
                "--begin-instant/--end-instant (incremental) cannot be combined "
                "with --as-of or --read-optimized"
            )
        result = reader.incremental(args.begin_instant, args.end_instant)
    elif args.read_optimized:
        result = reader.read_optimized(args.as_of)
    else:
        result = reader.snapshot(args.as_of)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(result, out)
    corrupt = len(reader.result.report)
    note = f" ({corrupt} corrupt log block(s) skipped)" if corrupt else ""
    print(f"wrote {result.num_rows} rows, {result.num_columns} columns to {out}{note}")
    return 0


def _read_cdc(table: HoodieTable, args: argparse.Namespace) -> int:
    """``--cdc``: Hudi's CDC query (op, ts_ms, before, after) over (begin, end]."""
    if args.begin_instant is None:
        raise UsageError("--cdc needs --begin-instant (changes after it are returned)")
    if args.as_of or args.read_optimized:
        raise UsageError("--cdc cannot be combined with --as-of or --read-optimized")
    result = read_cdc(table, args.begin_instant, args.end_instant, from_compaction=args.cdc_from_compaction)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(result, out)
    print(f"wrote {result.num_rows} changes to {out}")
    return 0


def cmd_write(args: argparse.Namespace) -> int:
    input_path = Path(args.input)
    if not input_path.is_file():
        raise UsageError(f"--input {args.input}: no such file")
    try:
        data = pq.read_table(input_path)
    except pa.ArrowInvalid as e:
        raise UsageError(f"--input {args.input} is not a readable Parquet file: {e}") from e
    hudi_options = _options(args.option)
    operation = WriteOperation(args.operation)
    if args.create:  # refuse what the options declare before the table is created
        TableShape.declared(args.table, hudi_options).check("write", operation.value)
        if not args.record_key:
            raise UsageError("--create needs --record-key COLS")
        if hudi_options.get("hoodie.index.type", "").strip().upper() == "BUCKET":
            check_bucket_options(hudi_options, _split(args.record_key))  # before the table exists
        name = args.table_name or Path(args.table.rstrip("/")).name
        create_table(
            args.table,
            table_name=name,
            table_type=TableType(args.table_type),
            schema=data.schema,
            record_key_fields=_split(args.record_key),
            partition_fields=_split(args.partition_field),
            ordering_fields=_split(args.ordering_field),
            merge_mode=RecordMergeMode(args.merge_mode) if args.merge_mode else None,
            table_version=TableVersion(args.table_version),
            hive_style_partitioning=args.hive_style,
            extra_properties={k: v for k, v in hudi_options.items() if k.startswith("hoodie.table.")},
            metadata_table=(
                hudi_options["hoodie.metadata.enable"].strip().lower() == "true"
                if "hoodie.metadata.enable" in hudi_options
                else None
            ),
        )
    table = HoodieTable.open(args.table)
    if args.log_block_format:
        hudi_options["hoodie.logfile.data.block.format"] = args.log_block_format
    options = WriteOptions.from_hudi_config(hudi_options)
    result = HoodieWriter(table, options=options, write_props=hudi_options).write(data, operation)
    print(
        f"committed {result.instant.requested_time} ({result.instant.action.value}): "
        f"{result.num_inserts} inserted, {result.num_updates} updated, {result.num_deletes} deleted "
        f"in {len(result.write_stats)} file(s)"
    )
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    table = HoodieTable.open(args.table)
    rows = []
    for instant in table.timeline:
        rows.append(
            {
                "requested_time": instant.requested_time,
                "completion_time": instant.completion_time,
                "action": instant.action.value,
                "state": instant.state.name,
                "file": table.timeline.state_file(instant.requested_time, instant.state),
            }
        )
    if args.json:
        print(json.dumps({"table": table.name, "version": table.table_version, "instants": rows}, indent=2))
        return 0
    print(f"{table.name} ({table.config.table_type.value}, table version {table.table_version})")
    print(f"{'requested':<18} {'completed':<18} {'action':<14} state")
    for r in rows:
        print(f"{r['requested_time']:<18} {r['completion_time'] or '-':<18} {r['action']:<14} {r['state']}")
    return 0


@contextlib.contextmanager
def _table_lock(table: HoodieTable, options: dict[str, str]) -> Iterator[Any]:
    """The lock ``hoodie.write.lock.provider`` names (None: the in-process default), released after."""
    from service.locks import PROVIDER_KEY, make_lock

    if PROVIDER_KEY not in options:
        yield None
        return
    lock = make_lock(
        table_id=table.name,
        base_path=table.base_path,
        table_name=table.name,
        options=options,
        client_id=f"hts-cli-{socket.gethostname()}",
        base_uri=table.uri(),
    )
    try:
        yield lock
    finally:
        lock.close()


def cmd_service(args: argparse.Namespace) -> int:
    from jobs import run as jobs_run

    options = _options(args.option)
    if args.command == "run" and args.instant:
        raise UsageError("hts run plans a new instant; use hts execute --instant to run an existing one")
    table = HoodieTable.open(args.table)  # once per command
    with _table_lock(table, options) as lock:
        if args.command == "schedule":
            summary = jobs_run.schedule(args.service, table, options, dry_run=args.dry_run, lock=lock)
        elif args.command == "execute":
            summary = jobs_run.execute(
                args.service,
                table,
                options,
                instant=args.instant,
                dry_run=args.dry_run,
                spark_master=args.spark_master,
                lock=lock,
            )
        else:
            summary = jobs_run.run(
                args.service,
                table,
                options,
                dry_run=args.dry_run,
                spark_master=args.spark_master,
                lock=lock,
            )
    if args.dry_run or args.json:
        print(json.dumps(summary.as_json(), indent=2, default=str))
        return 0
    if args.command in ("schedule", "run"):
        if summary.scheduled:
            print(f"scheduled {args.service} {summary.scheduled} ({summary.reason})")
        else:
            print(f"nothing to schedule for {args.service}")
    for result in summary.executed:
        print(
            f"completed {args.service} {result.instant.requested_time} -> "
            f"{result.instant.completion_time or '-'} "
            f"({len(result.write_stats)} file(s) written)"
        )
    for ts, why in summary.skipped.items():
        print(f"skipped {args.service} {ts}: {why}", file=sys.stderr)
    if args.command == "execute" and not summary.executed and not summary.skipped:
        print(f"no pending {args.service} instants")
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from service.quickstart import run_quickstart

    if args.if_missing and (Path(args.dir) / ".hoodie").is_dir():
        print(f"demo table already at {args.dir}")
        return 0
    run_quickstart(Path(args.dir))
    return 0


def cmd_request(args: argparse.Namespace) -> int:
    """Write a REQUESTED plan and exit; a daemon watching the table executes it."""
    from jobs import run as jobs_run

    options = _options(args.option)
    table = HoodieTable.open(args.table)
    with _table_lock(table, options) as lock:
        summary = jobs_run.schedule(args.service, table, options, lock=lock)
    if args.json:
        print(json.dumps(summary.as_json(), indent=2, default=str))
    elif summary.scheduled:
        print(f"requested {args.service} {summary.scheduled} ({summary.reason})")
    else:
        print(f"nothing to request for {args.service}")
    return 0


def _serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.host is not None or args.port is not None:
        out["api"] = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    tables: dict[str, Any] = {}
    if args.discover:
        tables["discover"] = list(args.discover)
    if args.table:
        tables["static"] = [{"path": p} for p in args.table]
        if not args.discover:
            tables["discover"] = []
    if tables:
        out["tables"] = tables
    if args.spark_master:
        out["spark"] = {"master": args.spark_master}
    if args.state_dir:
        out["state_dir"] = args.state_dir
    if args.poll_interval is not None:
        out["watch"] = {"poll_interval_s": args.poll_interval}
    if args.replica_id:
        out["ha"] = {"replica_id": args.replica_id}
    return out


def cmd_serve(args: argparse.Namespace) -> int:
    from service.locks import check_lock_options
    from service.settings import load_settings

    settings = load_settings(args.config, _serve_overrides(args))
    if args.print_config:
        print(yaml.safe_dump(settings.as_json(), sort_keys=False))
    if args.validate_config:
        for token in settings.api.tokens:
            token.secret()  # token files must be readable
        check_lock_options(settings.defaults.options, "(defaults.options)")
        for n, spec in enumerate(settings.tables.static):
            check_lock_options(
                {**settings.defaults.options, **spec.options}, f"tables.static[{n}] ({spec.path})"
            )
        print(f"configuration is valid ({args.config or 'embedded defaults'})", file=sys.stderr)
        return 0
    if args.print_config:
        return 0
    import uvicorn

    from service.api import create_app
    from service.daemon import Daemon
    from service.logs import configure

    configure(settings.logging.format, settings.logging.level)
    app = create_app(Daemon(settings))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.api.host,
            port=settings.api.port,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=5,
        )
    )
    # uvicorn turns SIGTERM/SIGINT into a graceful shutdown (the daemon's stop runs in the app's
    # lifespan) and afterwards re-raises the signal to the handler that was installed before it;
    # with this one the process then exits 0, as an orchestrator expects from a clean stop.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _sig, _frame: None)
    url = console_url(settings)
    logging.getLogger("hts").info("console at %s (REST API under /v1, OpenAPI at /docs)", url)
    server.run()
    return 0


def console_url(settings: Settings) -> str:
    """Where a browser on this machine opens the console (``/``) of a daemon with ``settings``."""
    host = settings.api.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.api.port}/"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hts", description="Table services for Apache Hudi tables.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    read = sub.add_parser("read", help="read a table into a Parquet file (meta fields included)")
    read.add_argument("table", help="table base path or URI")
    read.add_argument("--out", required=True, help="output Parquet file")
    read.add_argument("--as-of", help="time travel: read as of this instant (yyyyMMddHHmmssSSS)")
    read.add_argument("--read-optimized", action="store_true", help="base files only (MERGE_ON_READ)")
    read.add_argument("--begin-instant", help="incremental read: records written after this instant")
    read.add_argument("--end-instant", help="incremental read: up to and including this instant")
    read.add_argument(
        "--cdc",
        action="store_true",
        help="CDC query (op, ts_ms, before, after) of a CDC table, as Spark reads it (compactions skipped)",
    )
    read.add_argument(
        "--cdc-from-compaction",
        action="store_true",
        help="CDC query as Flink reads it (read.cdc.from.changelog): a MERGE_ON_READ table's changes "
        "come from its compaction commits, not its delta commits (implies --cdc)",
    )
    read.set_defaults(func=cmd_read)

    write = sub.add_parser("write", help="write a Parquet file into a table")
    write.add_argument("table", help="table base path or URI")
    write.add_argument("--input", required=True, help="input Parquet file")
    write.add_argument("--operation", required=True, choices=[o.value for o in WriteOperation])
    write.add_argument("--create", action="store_true", help="create the table first")
    write.add_argument("--table-name", help="table name for --create (default: the folder name)")
    write.add_argument("--table-type", default="MERGE_ON_READ", choices=[t.value for t in TableType])
    write.add_argument("--table-version", type=int, default=8, choices=[6, 8, 9])
    write.add_argument("--record-key", help="record key column(s), comma-separated")
    write.add_argument("--ordering-field", help="ordering (precombine) column(s), comma-separated")
    write.add_argument("--partition-field", help="partition column(s), comma-separated")
    write.add_argument("--hive-style", action="store_true", help="hive-style partition folders (col=value)")
    write.add_argument("--merge-mode", choices=[m.value for m in RecordMergeMode])
    write.add_argument("--log-block-format", choices=[f.value for f in LogBlockFormat])
    write.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="Hudi config (repeatable)"
    )
    write.set_defaults(func=cmd_write)

    timeline = sub.add_parser("timeline", help="show a table's active timeline")
    timeline.add_argument("table", help="table base path or URI")
    timeline.add_argument("--json", action="store_true", help="print JSON")
    timeline.set_defaults(func=cmd_timeline)

    services = registry.ALL
    verbs = {
        "schedule": "write a table-service plan (REQUESTED instant)",
        "execute": "run REQUESTED instants and recover abandoned INFLIGHT ones",
        "run": "schedule, then execute",
    }
    for verb, help_text in verbs.items():
        p = sub.add_parser(verb, help=help_text)
        p.add_argument("service", choices=services)
        p.add_argument("table", help="table base path or URI")
        p.add_argument("--instant", help="the instant to execute (default: every pending one)")
        p.add_argument("--dry-run", action="store_true", help="print the plan as JSON; write nothing")
        p.add_argument(
            "--option", action="append", default=[], metavar="KEY=VALUE", help="Hudi config (repeatable)"
        )
        p.add_argument(
            "--spark-master",
            help="local[*] (default), spark://host:7077, k8s://https://..., sc://host:15002, or in-process",
        )
        p.add_argument("--json", action="store_true", help="print a JSON summary")
        p.set_defaults(func=cmd_service)

    quick = sub.add_parser(
        "quickstart", help="write a demo MERGE_ON_READ table, upsert into it, read it back"
    )
    quick.add_argument("--dir", default="var/quickstart", help="where to put the demo table")
    quick.add_argument("--if-missing", action="store_true", help="do nothing if the table exists")
    quick.set_defaults(func=cmd_quickstart)

    request = sub.add_parser(
        "request", help="write a REQUESTED table-service plan and exit (a daemon executes it)"
    )
    request.add_argument("service", choices=registry.names(requestable=True))
    request.add_argument("table", help="table base path or URI")
    request.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="Hudi config (repeatable)"
    )
    request.add_argument("--json", action="store_true", help="print a JSON summary")
    request.set_defaults(func=cmd_request)

    serve = sub.add_parser("serve", help="run the table-services daemon (REST API, metrics, watchers)")
    serve.add_argument("--config", help="YAML settings file (environment HTS_* and flags override it)")
    serve.add_argument(
        "--discover",
        action="append",
        default=[],
        metavar="DIR",
        help="root to discover tables under (repeatable)",
    )
    serve.add_argument(
        "--table", action="append", default=[], metavar="PATH", help="a table to serve (repeatable)"
    )
    serve.add_argument("--host", help="API address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="API port (default 8080)")
    serve.add_argument("--spark-master", help="local[*] (default), spark://, k8s://, sc:// or in-process")
    serve.add_argument("--state-dir", help="where the run history lives (default var/hts)")
    serve.add_argument("--poll-interval", type=float, help="seconds between looks at each timeline")
    serve.add_argument("--replica-id", help="this replica's name (default: the host name)")
    serve.add_argument("--validate-config", action="store_true", help="check the settings and exit")
    serve.add_argument("--print-config", action="store_true", help="print the effective settings and exit")
    serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.func(args)
        return code
    except (UsageError, HoodieError, ServiceError, ValueError) as e:
        print(f"hts {args.command}: error: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"hts {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
