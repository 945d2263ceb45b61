"""``python -m bench``: generate (or reuse) the table, verify the readers, time them, report."""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import hudi
import pyarrow as pa
import pyarrow.parquet as pq

from bench import data as bench_data
from bench.measure import Memory, Timing, measure_in_subprocess, time_readers
from bench.readers import READERS
from bench.report import Target, format_memory, format_targets, format_timings
from bench.verify import VerificationError, check_agree, check_ours

DEFAULT_ROWS = 2_000_000
UPDATE_FRACTION = 0.10
#: The benchmark's sections, in the order they run.
SECTIONS = (
    "read", "compaction", "s3", "clustering", "clean", "planning", "metadata", "daemon", "watch", "scaleout",
    "console",
)  # fmt: skip
#: Sections that run only when named (``--only``): ``make bench-big`` runs them, so that ``make bench``
#: stays under issue 18's 20 minutes on the 2-core machine.
BIG_SECTIONS = ("scaleout",)
#: Targets: ours/floor time, ours/hudi-rs time, ours peak RSS over the merged slice's Arrow size.
TARGET_VS_FLOOR = 1.2  # issue 18: the snapshot read within 1.2x the pyarrow floor (was 1.5x)
TARGET_VS_HUDI_RS = 1.0
TARGET_MEMORY = 3.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="rows in the base file (default 2,000,000)")
    p.add_argument(
        "--updates",
        type=int,
        default=None,
        help=f"keys updated in the Avro log block (default {UPDATE_FRACTION:.0%}% of --rows)",
    )
    p.add_argument("--repeat", type=int, default=3, help="timed runs per reader, interleaved (best is used)")
    p.add_argument("--regenerate", action="store_true", help="rebuild the cached table")
    p.add_argument("--cache-dir", type=Path, default=bench_data.DEFAULT_CACHE, help="default var/bench")
    p.add_argument("--no-memory", action="store_true", help="skip the fresh-process memory runs")
    p.add_argument("--profile", action="store_true", help="also print a stage breakdown and cProfile")
    p.add_argument(
        "--metadata-files", type=int, default=None, help="files each metadata-section commit touches (1,000)"
    )
    p.add_argument(
        "--planning-partitions",
        type=int,
        default=None,
        help="partitions of the planning section's table, 20 file groups each (default 10,000)",
    )
    p.add_argument(
        "--console-tables",
        type=int,
        default=1000,
        help="tables of the console section's fleet (default 1,000)",
    )
    p.add_argument(
        "--only",
        choices=SECTIONS,
        action="append",
        help=f"run only these sections (repeatable; default: all but {', '.join(BIG_SECTIONS)})",
    )
    return p.parse_args(argv)


def selected_sections(only: Sequence[str] | None) -> set[str]:
    """The sections ``--only`` names, else every section but :data:`BIG_SECTIONS`."""
    return set(only) if only else {s for s in SECTIONS if s not in BIG_SECTIONS}


def verify(data: bench_data.BenchData) -> list[str]:
    """Read once with every reader (this also warms the page cache) and check the rows."""
    ours = READERS["ours"](data)
    lines = check_ours(data, ours)
    for name in ("hudi-rs", "floor"):
        other = READERS[name](data)
        lines.append(check_agree(name, ours, other))
        del other
    return lines


def targets(timings: dict[str, Timing], memory: dict[str, Memory] | None) -> list[Target]:
    ours = timings["ours"].best
    out = [
        Target("time ours / floor", ours / timings["floor"].best, TARGET_VS_FLOOR, "x"),
        Target("time ours / hudi-rs", ours / timings["hudi-rs"].best, TARGET_VS_HUDI_RS, "x"),
    ]
    if memory is not None:
        m = memory["ours"]
        out.append(
            Target(
                "peak RSS increase of our read / Arrow nbytes of the merged slice",
                m.peak_rss_delta / m.result_nbytes,
                TARGET_MEMORY,
                "x",
            )
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows: int = args.rows
    updates: int = args.updates if args.updates is not None else int(rows * UPDATE_FRACTION)
    if not 0 < updates <= rows:
        raise SystemExit("--updates must be between 1 and --rows")
    started = time.perf_counter()
    order = SECTIONS
    sections = selected_sections(args.only)
    print(f"hts benchmarks: {', '.join(s for s in order if s in sections)}")
    if not args.only:
        print(f"(in make bench-big, or --only: {', '.join(BIG_SECTIONS)})")
    if sections & {"read", "compaction", "s3"}:
        print(
            f"data: MERGE_ON_READ v8, 1 file group, {rows:,} rows x "
            f"{len(bench_data.DATA_SCHEMA)} data columns (+5 meta), "
            f"{updates:,} keys updated in one Avro log block"
        )
    print(
        f"python {platform.python_version()}, pyarrow {pa.__version__}, hudi-rs {hudi.__version__}, "
        f"{_cpus()} CPU(s)"
    )
    if sections & {"read", "compaction", "s3"}:
        status = data_sections(args, sections, rows, updates)
        if status:
            return status
    later = {
        "clustering": partial(clustering_section, args, rows),
        "clean": partial(clean_section, args),
        "planning": partial(planning_section, args),
        "metadata": partial(metadata_section, args),
        "daemon": partial(daemon_section, args),
        "watch": partial(watch_section, args),
        "scaleout": partial(scaleout_section, args),
        "console": partial(console_section, args),
    }
    for name, run in later.items():
        if name in sections:
            _timed(name, run)
    print(f"(benchmark wall time {time.perf_counter() - started:.0f}s)")
    return 0


def data_sections(args: argparse.Namespace, sections: set[str], rows: int, updates: int) -> int:
    """The read and compaction sections on the generated file group; 1 if it fails verification."""
    started = time.perf_counter()
    data = bench_data.ensure(rows, updates, cache_dir=args.cache_dir, regenerate=args.regenerate)
    groups = pq.ParquetFile(data.base_file).metadata.num_row_groups
    print(
        f"base file {data.base_file_bytes / 1e6:.1f} MB parquet ({data.compression}, {groups} row groups), "
        f"log file {data.log_file_bytes / 1e6:.1f} MB (one uncompressed Avro data block), "
        f"floor's updates.parquet {data.updates_parquet.stat().st_size / 1e6:.1f} MB ({data.compression})"
    )
    print("\nverification (before timing):")
    try:
        for line in verify(data):
            print(f"  ok  {line}")
    except VerificationError as e:
        print(f"  FAILED  {e}")
        return 1
    print(f"  (data and verification: {time.perf_counter() - started:.0f}s wall)")
    for name, section in (("read", read_section), ("compaction", compaction_section), ("s3", s3_section)):
        if name in sections:
            _timed(name, partial(section, args, data))
    return 0


def _timed(name: str, run: Callable[[], None]) -> None:
    """Run one section and print its wall time (``make bench`` must stay under 20 minutes)."""
    started = time.perf_counter()
    run()
    print(f"  (section {name}: {time.perf_counter() - started:.0f}s wall)")


def s3_section(args: argparse.Namespace, data: bench_data.BenchData) -> None:
    from bench import s3

    repeat = min(args.repeat, 2)
    t = s3.time_s3_compaction(data, repeat, args.cache_dir / "scratch")
    print(
        f"\ncompaction of the same file group on S3 (moto's emulator behind the counting proxy, "
        f"{t.latency_s * 1000:.0f} ms per request), in process, best of {repeat}:"
    )
    for phase, counts in (("scheduling", t.schedule_requests), ("executing", t.execute_requests)):
        ops = ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"  S3 requests {phase} one compaction: {sum(counts.values())} ({ops})")
    s3_best, local_best = min(t.s3_seconds), min(t.local_seconds)
    print(f"  {s3_best:7.3f}s best  ({' '.join(f'{x:.2f}' for x in t.s3_seconds)})  executing on S3")
    local_runs = " ".join(f"{x:.2f}" for x in t.local_seconds)
    print(f"  {local_best:7.3f}s best  ({local_runs})  executing on local disk")
    print(f"  {t.s3_seconds_no_latency:7.3f}s        executing on S3 without the added latency")
    print(f"  S3 / local disk: {s3_best / local_best:.2f}x")


def scaleout_section(args: argparse.Namespace) -> None:
    from bench import scaleout

    t = scaleout.time_scaleout(args.cache_dir, args.repeat)
    print(
        f"\nSpark scale-out: {t.file_groups} file groups ({t.rows:,} rows) on a standalone cluster of one "
        f"worker, then two (one core each; this machine has {_cpus()} CPU(s) for the driver, the workers "
        f"and their Python workers), best of {args.repeat}, net of Spark start-up:"
    )
    for name, runs in (("compaction", t.compaction), ("clustering", t.clustering)):
        for workers, times in runs.items():
            each = " ".join(f"{x:.2f}" for x in times)
            print(f"  {min(times):7.3f}s best  ({each})  {name}, {workers} worker(s)")
    for name, runs in (("compaction", t.compaction), ("clustering", t.clustering)):
        print(
            f"  {name} time, 2 workers / 1 worker    {min(runs[2]) / min(runs[1]):.2f}x  (no target: 2 cores)"
        )


def daemon_section(args: argparse.Namespace) -> None:
    from bench import daemon

    root = args.cache_dir / "daemon"
    print("\ndaemon (hts serve in its own process, tasks in process):")
    lat = daemon.request_latency(root / "latency")
    print(
        f"  REQUESTED -> INFLIGHT over {lat.requests} requests on {lat.tables} watched tables, poll "
        f"{lat.poll_s:.1f}s: p50 {lat.p50:.3f}s, p99 {lat.p99:.3f}s, worst {lat.worst:.3f}s"
    )
    idle = daemon.idle_cpu(root / "idle")
    print(
        f"  idle with {idle.tables} watched tables, poll {idle.poll_s:.0f}s: {idle.cpu_s:.2f}s CPU in "
        f"{idle.window_s:.0f}s = {idle.share:.1%} of one core"
    )
    for skew in (None, 200):
        rate = daemon.truetime_rate(root / "truetime", skew_ms=skew)
        print(
            f"  TrueTime: {rate.calls} times in {rate.seconds:.1f}s = {rate.per_second:,.0f}/s over "
            f"{rate.tables} tables (skew wait {rate.skew_ms} ms, in-process lock)"
        )
    print(
        format_targets(
            [
                Target(
                    "REQUESTED->INFLIGHT p99 / poll interval",
                    lat.p99 / lat.poll_s,
                    daemon.TARGET_P99_VS_POLL,
                    "x",
                ),
                Target(
                    f"idle CPU, % of one core, {idle.tables} tables",
                    100 * idle.share,
                    100 * daemon.TARGET_IDLE_CPU,
                    "%",
                ),
            ]
        )
    )


def watch_section(args: argparse.Namespace) -> None:
    from bench import watch

    root = args.cache_dir / "watch"
    print("\nwatching object stores (S3 and SQS: moto's emulators in this process, requests counted):")
    idle = watch.idle_requests(root / "idle")
    print(
        f"  idle tables ({idle.tables}), simulated clock, ceiling {idle.ceiling_s:.0f}s: "
        f"{idle.hts_per_table_hour:.1f} requests per table-hour counted by hts, "
        f"{idle.store_per_table_hour:.1f} answered by the store; first hour (open + back-off) "
        f"{idle.first_hour_per_table:.1f}"
    )
    long_idle, ceiling = watch.long_idle_reaction(root / "long-idle")
    active_queued, active_started = watch.active_s3_latency(root / "active")
    event, queue = watch.event_reaction(root / "events")
    for r, clock in [
        (long_idle, "simulated clock"),
        (active_queued, "wall clock, 60 requests over 60s on 200 watched tables, 20 ms a request, poll 5s"),
        (active_started, "wall clock, same run"),
        (event, "wall clock, 20 ms a request"),
    ]:
        print(
            f"  {r.what} ({clock}): p50 {r.p50:.3f}s, p99 {r.p99:.3f}s, worst {r.worst:.3f}s, n={r.samples}"
        )
    print(f"  event queue requests over the event run: {queue}")
    print(
        format_targets(
            [
                Target(
                    "requests per idle table-hour", idle.store_per_table_hour, watch.TARGET_IDLE_PER_HOUR, ""
                ),
                Target(
                    "REQUESTED->INFLIGHT p99 / poll, 200 active S3 tables",
                    active_started.p99 / 5.0,
                    watch.TARGET_VS_POLL,
                    "x",
                ),
                Target(
                    "long-idle reaction p99 / ceiling", long_idle.p99 / ceiling, watch.TARGET_VS_CEILING, "x"
                ),
                Target("event-driven reaction p99", event.p99, watch.TARGET_EVENT_S, "s"),
            ]
        )
    )


def console_section(args: argparse.Namespace) -> None:
    from bench import console

    print("\nconsole (hts serve in its own process; the fleet page's data against GET /v1/tables):")
    fig = console.fleet_page(args.cache_dir / "console", tables=args.console_tables)
    print(
        f"  {fig.tables} tables ({fig.pending} with a queued compaction, {fig.broken} unreadable), "
        f"median of {fig.rounds} interleaved rounds: GET /v1/tables {fig.tables_s * 1000:.1f} ms "
        f"({fig.tables_bytes / 1024:.0f} KB), GET /v1/fleet {fig.fleet_s * 1000:.1f} ms "
        f"({fig.fleet_bytes / 1024:.0f} KB); GET /v1/whoami (once per page load) "
        f"{fig.whoami_s * 1000:.1f} ms, so a first load is "
        f"{(fig.fleet_s + fig.whoami_s) / fig.tables_s:.2f}x GET /v1/tables"
    )
    print(
        format_targets(
            [
                Target(
                    f"fleet page data (GET /v1/fleet) / GET /v1/tables, {fig.tables} tables",
                    fig.ratio,
                    console.TARGET_VS_TABLES,
                    "x",
                ),
                Target("fleet page data size, KB", fig.fleet_bytes / 1024, console.TARGET_BYTES / 1024, "KB"),
            ]
        )
    )


def read_section(args: argparse.Namespace, data: bench_data.BenchData) -> None:
    names = list(READERS)
    print(f"\ntiming: best of {args.repeat}, readers interleaved, in this process (wall clock)")
    timings = time_readers(data, names, args.repeat)
    print(format_timings(timings))

    memory: dict[str, Memory] | None = None
    if not args.no_memory:
        print(
            "\nmemory: one read per reader, each in a fresh process; peak RSS above the post-import baseline"
        )
        memory = {n: measure_in_subprocess(n, data) for n in names}
        print(format_memory(memory))

    print("\nread targets:")
    print(format_targets(targets(timings, memory)))

    if args.profile:
        from bench.profile import cprofile_read, stage_breakdown

        print(f"\nstage breakdown of our read (seconds, best of {args.repeat}):")
        for name, seconds in stage_breakdown(data, args.repeat):
            print(f"  {seconds:7.3f}  {name}")
        print("\ncProfile of one snapshot():")
        print(cprofile_read(data))


def compaction_section(args: argparse.Namespace, data: bench_data.BenchData) -> None:
    from bench import compaction

    scratch = args.cache_dir / "scratch"
    print(
        f"\ncompaction of the same file group ({data.rows:,} rows, {data.updates:,} updated in Avro "
        f"log blocks), best of {args.repeat}, a fresh copy of the table each run, {data.compression} output:"
    )
    t = compaction.time_compaction(data, args.repeat, scratch)
    rows = [
        ("ours on Spark local[*] (net of start-up)", t.ours_spark),
        ("ours in process", t.ours_in_process),
        ("ours in process, CDC table (DATA_BEFORE_AFTER)", t.ours_cdc_in_process),
        ("floor: pyarrow read + merge by key + write", t.floor),
    ]
    for name, runs in rows:
        print(f"  {min(runs):7.3f}s best  ({' '.join(f'{x:.2f}' for x in runs)})  {name}")
    targets_out = [
        Target(
            "compaction time ours (Spark) / floor",
            min(t.ours_spark) / min(t.floor),
            compaction.TARGET_VS_FLOOR,
            "x",
        ),
        Target(
            "compaction with CDC logs / without (in process)",
            min(t.ours_cdc_in_process) / min(t.ours_in_process),
            compaction.TARGET_CDC,
            "x",
        ),
    ]
    if not args.no_memory:
        mem = compaction.measure_task_memory(data, scratch / "memory")
        print(
            f"  compaction task in a fresh process: peak RSS +{mem['peak_rss_delta'] / 1e6:,.0f} MB, "
            f"output {mem['output_nbytes'] / 1e6:,.0f} MB Arrow ({mem['rows']:,} rows), {mem['seconds']:.2f}s"
        )
        targets_out.append(
            Target(
                "compaction task peak RSS / Arrow size of its output",
                mem["peak_rss_delta"] / mem["output_nbytes"],
                compaction.TARGET_MEMORY,
                "x",
            )
        )
    print(format_targets(targets_out))


def clustering_section(args: argparse.Namespace, rows: int) -> None:
    from bench import clustering

    files = 8
    t = clustering.time_clustering(args.cache_dir, rows, files, args.repeat)
    print(
        f"\nclustering of one group of {t.files} COPY_ON_WRITE file groups ({t.rows:,} rows, "
        f"{t.input_bytes / 1e6:.1f} MB {clustering.BASE_COMPRESSION}) into one file, best of {args.repeat}, "
        "in process, a fresh copy of the table each run:"
    )
    for name, runs in (
        ("ours, binary copy (SparkBinaryCopyClusteringExecutionStrategy)", t.binary_copy),
        ("ours, decode-rewrite (SparkSortAndSizeExecutionStrategy)", t.rewrite),
        ("floor: pyarrow read + set _hoodie_file_name + write", t.floor),
    ):
        print(f"  {min(runs):7.3f}s best  ({' '.join(f'{x:.2f}' for x in runs)})  {name}")
    print(
        format_targets(
            [
                Target(
                    "binary-copy clustering / decode-rewrite floor",
                    min(t.binary_copy) / min(t.floor),
                    clustering.TARGET_VS_FLOOR,
                    "x",
                )
            ]
        )
    )


def clean_section(args: argparse.Namespace) -> None:
    from bench import clean

    t = clean.time_clean_planning(args.cache_dir, args.repeat)
    print(
        f"\nclean planning (KEEP_LATEST_COMMITS, 3 retained) of a table with {t.files:,} files, "
        f"best of {args.repeat}:"
    )
    print(f"  {t.listing:7.3f}s  listing every partition")
    print(f"  {t.planning:7.3f}s  planning from that listing ({t.to_delete:,} files to delete)")
    print(
        format_targets(
            [Target("clean planning / listing", t.planning / t.listing, clean.TARGET_VS_LISTING, "x")]
        )
    )


def planning_section(args: argparse.Namespace) -> None:
    from bench import planning

    found = []
    for metadata_table in (False, True):
        t = planning.time_planning(
            args.cache_dir,
            args.repeat,
            metadata_table=metadata_table,
            partitions=args.planning_partitions or planning.PARTITIONS,
        )
        where = (
            "the metadata table's files partition" if metadata_table else "storage (one listing per folder)"
        )
        print(
            f"\nplanning over {t.partitions:,} partitions, {t.file_groups:,} file groups "
            f"({t.files:,} files), "
            f"metadata table {'on' if metadata_table else 'off'}, best of {args.repeat} "
            f"(table built or reused in {t.build:.1f}s):"
        )
        print(f"  {t.listing:7.3f}s  bare listing of {where}  (CPU {t.cpu['listing']:.3f}s)")
        columnar = t.planning.pop(planning.COLUMNAR, None)
        if columnar is not None:
            cpu = t.cpu[planning.COLUMNAR]
            print(f"  {columnar:7.3f}s  {planning.COLUMNAR}, as the planners read it  (CPU {cpu:.3f}s)")
        for name, seconds in t.planning.items():
            ratio = t.cpu[name] / t.cpu["listing"]
            also = f"; {seconds / columnar:.2f}x the columnar read" if columnar else ""
            cost = f"CPU {t.cpu[name]:.3f}s, {ratio:.2f}x the listing's{also}"
            print(f"  {seconds:7.3f}s  {name} planning  ({cost})")
            label = f"{name} planning / listing, metadata table {'on' if metadata_table else 'off'}"
            found.append(Target(label, seconds / t.listing, planning.TARGET_VS_LISTING, "x"))
    print(format_targets(found))


def metadata_section(args: argparse.Namespace) -> None:
    from bench import metadata

    files = args.metadata_files or metadata.FILES
    print(
        f"\nmetadata-table update of commits touching {files:,} files ({metadata.ROWS_PER_FILE} records "
        "each, MERGE_ON_READ):"
    )
    found = []
    for label, partitions in (
        ("statistics", metadata.STATISTICS),
        ("with record index", metadata.WITH_RECORD_INDEX),
    ):
        print(f"  {label}: files, {', '.join(partitions)}")
        for t in metadata.time_commits(args.cache_dir, files, partitions=partitions):
            print(
                f"    {t.name}: {t.files:,} files, data write {t.data:.2f}s, metadata-table update "
                f"{t.metadata:.2f}s, metadata-table services after it {t.services:.2f}s"
            )
            found.append(
                Target(
                    f"{label}, {t.name}: metadata update / data write", t.share, metadata.TARGET_SHARE, "x"
                )
            )
    print(format_targets(found))


def _cpus() -> int:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
