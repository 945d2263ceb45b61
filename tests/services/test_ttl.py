"""Partition TTL (``hoodie.services.ttl``): expired partitions as a model of Hudi's strategies says, deleted
by a DELETE_PARTITION replacecommit as Hudi writes it; readers (ours and hudi-rs) stop seeing them and a
later clean removes their files."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import InvalidInputError
from hoodie.metadata.records import MetadataPartition
from hoodie.metadata.table import MetadataTable
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner
from hoodie.services.orchestrator import ServiceOutcome, run, service_context
from hoodie.services.ttl_strategy import (
    TTLConfig,
    TTLStrategyType,
    instant_time_plus_millis,
    java_hash_map_order,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from hoodie.transaction.lock import InProcessLockProvider
from hoodie.transaction.time_generator import WaitBasedTimeGenerator
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.conftest import hudi_rs_rows
from tests.tables import SCHEMA, new_table, rows

DAY_MS = 24 * 3600 * 1000
DAYS = "hoodie.partition.ttl.strategy.days.retain"


def write(path: Path, days_ago: int, data: pa.Table, operation: str = "insert") -> None:
    """Write ``data`` at an instant ``days_ago`` days back (a clock of our own, scoped to the table)."""
    table = HoodieTable.open(str(path))
    lock = InProcessLockProvider(table.base_path)
    clock = WaitBasedTimeGenerator(
        lock, table.tz, clock_ms=lambda: int(time.time() * 1000) - days_ago * DAY_MS, scope=str(path)
    )
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0), lock=lock, time_source=clock)
    getattr(writer, operation)(data)


def no_runner() -> LocalRunner:
    raise AssertionError("TTL runs no tasks: no runner (no Spark) may be made for it")


def ttl(path: Path, options: dict[str, str], *, dry_run: bool = False) -> ServiceOutcome:
    ctx = service_context(HoodieTable.open(str(path)), options)
    return run(ctx, "ttl", no_runner, dry_run=dry_run)


def planned(outcome: ServiceOutcome) -> list[str]:
    assert outcome.scheduled is not None
    return sorted(outcome.scheduled.plan_json()["partitionToReplaceFileIds"])


def file_ids(path: Path, partition: str) -> list[str]:
    view = HoodieTable.open(str(path)).file_system_view()
    return sorted({s.file_id for s in view.latest_file_slices([partition])})


def keys(path: Path) -> set[str]:
    return set(TableReader(HoodieTable.open(str(path))).snapshot().column("id").to_pylist())


def hudi_rs_keys(path: Path) -> set[str]:
    return {row.split("'id': '")[1].split("'")[0] for row in hudi_rs_rows(path)}


def table_hash(path: Path) -> dict[str, str]:
    out = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_file() and not rel.startswith((".hoodie/.aux/hts/", ".hoodie/.heartbeat/")):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# -- the rules -------------------------------------------------------------------------------------


def test_java_string_hash_and_hash_map_order() -> None:
    from hoodie.index.java_hash import java_string_hash

    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("p0") == 112 * 31 + 48
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112  # Java's well-known collision
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE in Java (overflow)
    # 'b' (98) falls in bucket 2, 'a' (97) in bucket 1 of a 16-bucket table: iteration puts 'a' first.
    assert java_hash_map_order(["b", "a"]) == ["a", "b"]
    # 20 keys resize the table to 32 buckets. The order below is what Java 21 printed for
    # keys.stream().collect(Collectors.toMap(k -> k, k -> k)).keySet() with these keys in this order.
    keys = [f"p{i}" for i in range(17)] + ["dt=2024-01-01", "region=us/p=p1", "missing"]
    java = "p0,p1,p2,p3,p4,p5,p6,p7,p8,p9,p10,p12,dt=2024-01-01,p11,p14,region=us/p=p1,p13,p16,p15,missing"
    assert java_hash_map_order(keys) == java.split(",")


def test_instant_arithmetic_is_hudis() -> None:
    import datetime as dt

    # second-granularity instants end at .999 (fixInstantTimeCompatibility)
    assert instant_time_plus_millis("20240101000000", 1000, dt.UTC) == "20240101000001999"
    assert instant_time_plus_millis("20240228120000000", DAY_MS, dt.UTC) == "20240229120000000"
    # longer ids (metadata-table suffixes) keep 17 digits; a numeric id that is no date adds as a number
    assert instant_time_plus_millis("20240101000000000010", 1, dt.UTC) == "20240101000000001"
    assert instant_time_plus_millis("001", 5, dt.UTC) == "00000000000000006"


def test_options_hudi_rejects_name_the_key() -> None:
    assert TTLConfig.from_options({}) == TTLConfig()
    assert TTLConfig.from_options({}).days_retain == -1 and TTLConfig().max_delete_partitions == 1000
    by_class = TTLConfig.from_options(
        {"hoodie.partition.ttl.strategy.class": TTLStrategyType.KEEP_BY_CREATION_TIME.class_name}
    )
    assert by_class.strategy is TTLStrategyType.KEEP_BY_CREATION_TIME
    lower = TTLConfig.from_options({"hoodie.partition.ttl.management.strategy.type": "keep_by_creation_time"})
    assert lower.strategy is TTLStrategyType.KEEP_BY_CREATION_TIME
    assert TTLConfig.from_options({"hoodie.partition.ttl.inline": "TRUE"}).inline
    assert not TTLConfig.from_options({"hoodie.partition.ttl.inline": "yes"}).inline  # Boolean.parseBoolean
    with pytest.raises(InvalidInputError, match=r"max.delete.partitions=-1 must not be negative"):
        TTLConfig.from_options({"hoodie.partition.ttl.strategy.max.delete.partitions": "-1"})
    with pytest.raises(InvalidInputError, match=r"days.retain='ten' is not an integer"):
        TTLConfig.from_options({DAYS: "ten"})
    with pytest.raises(InvalidInputError, match=r"strategy.type='KEEP_BY_EVENT_TIME'"):
        TTLConfig.from_options({"hoodie.partition.ttl.management.strategy.type": "KEEP_BY_EVENT_TIME"})
    with pytest.raises(InvalidInputError, match=r"strategy.class='com.acme.MyTTL'.*custom strategy class"):
        TTLConfig.from_options({"hoodie.partition.ttl.strategy.class": "com.acme.MyTTL"})
    with pytest.raises(
        InvalidInputError, match=r"partition.selected='p0,p1,p0' names partition\(s\) \['p0'\]"
    ):
        TTLConfig.from_options({"hoodie.partition.ttl.strategy.partition.selected": "p0,p1,p0"})
    assert TTLConfig.from_options(
        {"hoodie.partition.ttl.strategy.partition.selected": "a,,b,"}
    ).partition_selected == (
        "a",
        "",
        "b",
    )


# -- KEEP_BY_TIME --------------------------------------------------------------------------------


WRITES = [  # (days ago, ids, operation): ids land in partition p<id % 3>
    (40, range(9), "insert"),
    (20, [1, 4], "upsert"),
    (5, [11, 14], "insert"),
]


def _keep_by_time_model(table_type: TableType, retain_days: int) -> set[str]:
    """Hudi's rule: a partition's age is the newest base instant of its latest slices. Inserts start
    new file groups (base files); an upsert writes a new base file on COW and only log files on MOR."""
    newest: dict[str, int] = {}
    for days_ago, ids, operation in WRITES:
        if operation == "upsert" and table_type is TableType.MERGE_ON_READ:
            continue
        for i in ids:
            p = f"p{i % 3}"
            newest[p] = min(newest.get(p, days_ago), days_ago)
    return {p for p, days_ago in newest.items() if days_ago > retain_days}


@pytest.mark.parametrize(
    ("table_type", "version"),
    [
        (TableType.COPY_ON_WRITE, TableVersion.SIX),
        (TableType.COPY_ON_WRITE, TableVersion.EIGHT),
        (TableType.MERGE_ON_READ, TableVersion.SIX),
        (TableType.MERGE_ON_READ, TableVersion.EIGHT),
    ],
)
def test_keep_by_time_deletes_what_hudis_rule_says_with_hudis_replacecommit(
    tmp_path: Path, table_type: TableType, version: TableVersion
) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=table_type, version=version)
    for days_ago, ids, operation in WRITES:
        write(path, days_ago, rows(ids, 100 - days_ago), operation)
    expected = _keep_by_time_model(table_type, 30)
    assert expected == ({"p0"} if table_type is TableType.COPY_ON_WRITE else {"p0", "p1"})
    groups = {p: file_ids(path, p) for p in expected}
    live = {k for k in keys(path) if f"p{int(k[1:]) % 3}" not in expected}

    outcome = ttl(path, {DAYS: "30"})

    assert planned(outcome) == sorted(expected)
    [result] = outcome.executed
    instant = result.instant
    assert instant.action is Action.REPLACE_COMMIT and result.details["partitions_deleted"] == sorted(
        expected
    )
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    requested = RequestedReplaceMetadata.from_bytes(
        timeline.read_state(instant.requested_time, State.REQUESTED, instant.action), version
    )
    assert requested == RequestedReplaceMetadata(
        operation_type="DELETE_PARTITION", extra_metadata={}, version=1
    )
    inflight = CommitMetadata.from_bytes(
        timeline.read_state(instant.requested_time, State.INFLIGHT, instant.action), version
    )
    assert inflight.operation_type == "DELETE_PARTITION" and not inflight.partition_to_write_stats
    completed = table.commit_metadata(instant, timeline)
    assert isinstance(completed, ReplaceCommitMetadata)
    assert completed.operation_type == "DELETE_PARTITION"
    assert not completed.partition_to_write_stats
    assert completed.partition_to_replace_file_ids == groups
    assert completed.schema is not None  # the write client stores the table schema with the commit
    if version is TableVersion.SIX:  # JSON as Hudi 0.x writes it
        raw = json.loads(timeline.read_state(instant.requested_time, State.COMPLETED, instant.action))
        assert raw["operationType"] == "DELETE_PARTITION" and raw["partitionToWriteStats"] == {}
        assert raw["partitionToReplaceFileIds"] == groups
    assert keys(path) == live
    assert hudi_rs_keys(path) == live
    # the replaced files are still there until a clean removes them
    assert all((path / p).is_dir() for p in expected)


def test_keep_by_creation_time_takes_the_partition_metadata_commit_time(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows([0, 1, 3, 4], 1))  # creates p0 and p1
    write(path, 5, rows([2, 5], 2))  # creates p2
    write(path, 1, rows([0, 3], 3), "upsert")  # p0 written yesterday
    created = {
        p: (path / p / ".hoodie_partition_metadata").read_text().split("commitTime=")[1].split()[0]
        for p in ("p0", "p1", "p2")
    }
    assert created["p0"] == created["p1"] < created["p2"]
    by_time = ttl(path, {DAYS: "10"}, dry_run=True)
    assert planned(by_time) == ["p1"]  # KEEP_BY_TIME: p0 was written yesterday

    creation = {DAYS: "10", "hoodie.partition.ttl.management.strategy.type": "KEEP_BY_CREATION_TIME"}
    outcome = ttl(path, creation)

    assert planned(outcome) == ["p0", "p1"]
    assert outcome.scheduled is not None and f"p0: created at {created['p0']}" in outcome.scheduled.reason
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5"}


def test_selected_partitions_and_max_delete_partitions(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows(range(12), 1, partitions=6))
    options = {
        DAYS: "10",
        "hoodie.partition.ttl.strategy.partition.selected": "p4,p2,p0,missing",
        "hoodie.partition.ttl.strategy.max.delete.partitions": "2",
    }
    dry = ttl(path, options, dry_run=True)
    # Java's HashMap (KeepByTimeStrategy's Collectors.toMap) iterates p0 (bucket 0), p2 (2), p4 (4):
    # the limit keeps the first two; "missing" has no file slice and never expires.
    assert planned(dry) == ["p0", "p2"]
    assert dry.scheduled is not None and dry.scheduled.plan_json()["expiredTotal"] == 3

    ttl(path, options)
    assert {k for k in keys(path)} == {f"k{i}" for i in range(12) if i % 6 not in (0, 2)}
    again = ttl(path, options)  # p0 and p2 have no live file group left: p4 is next
    assert planned(again) == ["p4"]
    assert hudi_rs_keys(path) == {f"k{i}" for i in range(12) if i % 6 in (1, 3, 5)}


def test_multi_level_hive_style_partitions(tmp_path: Path) -> None:
    path = tmp_path / "t"
    schema = SCHEMA.append(pa.field("region", pa.string()))
    from hoodie.write.create import create_table

    create_table(
        str(path),
        table_name="h",
        table_type=TableType.COPY_ON_WRITE,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["region", "p"],
        ordering_fields=["ts"],
        hive_style_partitioning=True,
    )
    write(path, 40, rows(range(6), 1, schema=schema, region="us"))
    write(path, 2, rows(range(6, 12), 2, schema=schema, region="eu"))
    partitions = sorted(HoodieTable.open(str(path)).file_system_view().partitions())
    assert "region=us/p=p0" in partitions and "region=eu/p=p0" in partitions

    selected = ttl(
        path, {DAYS: "7", "hoodie.partition.ttl.strategy.partition.selected": "region=us/p=p1"}, dry_run=True
    )
    assert planned(selected) == ["region=us/p=p1"]
    ttl(path, {DAYS: "7"})
    assert keys(path) == hudi_rs_keys(path) == {f"k{i}" for i in range(6, 12)}
    assert sorted(HoodieTable.open(str(path)).file_system_view().partitions()) == partitions  # folders stay


# -- metadata table, clean, dry run --------------------------------------------------------------


@pytest.mark.parametrize("metadata_table", [True, False])
def test_clean_afterwards_removes_the_files_with_and_without_a_metadata_table(
    tmp_path: Path, metadata_table: bool
) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=metadata_table)
    write(path, 40, rows(range(9), 1))
    write(path, 3, rows([2, 5], 2), "upsert")
    write(path, 2, rows([2, 5], 3), "upsert")
    replaced = {f.relative_to(path).as_posix() for p in ("p0", "p1") for f in (path / p).glob("*.parquet")}
    assert replaced
    clean = {"hoodie.clean.commits.retained": "1"}
    # A first clean: later cleans are incremental, over the partitions of the instants since, which
    # include a replacecommit's replaced partitions (CleanPlanner.getPartitionsForInstants). A first,
    # full clean lists the partitions, from the metadata table when there is one, which no longer
    # lists the deleted partitions.
    assert run(service_context(HoodieTable.open(str(path)), clean), "clean", LocalRunner).executed

    ttl(path, {DAYS: "10"})
    table = HoodieTable.open(str(path))
    assert table.has_metadata_table is metadata_table
    if metadata_table:
        listed = MetadataTable.open(table, table.reload()).list_files(None)
        assert sorted(listed) == ["p2"]  # the files partition marks p0 and p1 deleted
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5", "k8"}
    for ts in (4, 5):  # more commits, so that the replace commit falls behind the retained ones
        write(path, 0, rows([2, 5, 8], ts), "upsert")

    cleaned = run(service_context(HoodieTable.open(str(path)), clean), "clean", LocalRunner)

    assert cleaned.executed
    assert not (path / "p0").exists() and not (path / "p1").exists()
    assert not any((path / f).exists() for f in replaced)
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5", "k8"}
    if metadata_table:
        table = HoodieTable.open(str(path))
        assert sorted(MetadataTable.open(table, table.reload()).list_files(None)) == ["p2"]


@pytest.mark.parametrize("metadata_table", [True, False])
def test_a_first_full_clean_lists_partitions_as_hudi_does(tmp_path: Path, metadata_table: bool) -> None:
    """CleanPlanner.getPartitionPathsForFullCleaning lists the table's partitions
    (FSUtils.getAllPartitionPaths): from the metadata table, whose partition list no longer has the
    deleted partitions, or from storage, which still has their folders."""
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=metadata_table)
    write(path, 40, rows(range(9), 1))
    ttl(path, {DAYS: "10"})
    for ts in (3, 4):
        write(path, 0, rows([2, 5, 8], ts), "upsert")

    cleaned = run(
        service_context(HoodieTable.open(str(path)), {"hoodie.clean.commits.retained": "1"}),
        "clean",
        LocalRunner,
    )

    assert cleaned.executed
    assert (path / "p0").exists() is metadata_table
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5", "k8"}


def test_dry_run_lists_the_partitions_and_why_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.MERGE_ON_READ)
    write(path, 40, rows(range(9), 1))
    write(path, 1, rows([2], 2), "insert")
    before = table_hash(path)

    code = main(["run", "ttl", str(path), "--dry-run", "--json", "--option", f"{DAYS}=30"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert table_hash(path) == before
    summary = json.loads(out)
    assert "would delete 2 of 2 expired partition(s)" in summary["reason"]
    assert "p0: last written at" in summary["reason"] and "expired at" in summary["reason"]
    [plan] = summary["plans"]
    assert sorted(plan["partitionToReplaceFileIds"]) == ["p0", "p1"]
    assert sorted(plan["reasons"]) == ["p0", "p1"]


def test_nothing_due_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 2, rows(range(6), 1))
    before = table_hash(path)
    for options in ({}, {DAYS: "10"}, {DAYS: "0"}):  # days.retain defaults to -1: nothing expires
        outcome = ttl(path, options)
        assert outcome.scheduled is None and not outcome.executed and outcome.note == "nothing due"
    assert table_hash(path) == before


def test_the_record_index_drops_the_keys_of_the_deleted_partitions(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows(range(9), 1))
    write(path, 1, rows([2, 5], 2), "upsert")
    run(
        service_context(HoodieTable.open(str(path)), {"hoodie.metadata.record.index.enable": "true"}),
        "indexing",
        LocalRunner,
    )
    table = HoodieTable.open(str(path))
    assert MetadataPartition.RECORD_INDEX in table.config.metadata_partitions
    index = MetadataTable.open(table, table.reload()).read_partition(MetadataPartition.RECORD_INDEX)
    assert sorted(index) == sorted(f"k{i}" for i in range(9))

    ttl(path, {DAYS: "10"})

    table = HoodieTable.open(str(path))
    index = MetadataTable.open(table, table.reload()).read_partition(MetadataPartition.RECORD_INDEX)
    # getRecordIndexReplacedRecords: the keys of p0's and p1's latest base files leave the index
    assert sorted(index) == ["k2", "k5", "k8"]
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5", "k8"}
    # a write of a deleted key inserts it again, in a new file group of its partition
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows([0], 9))
    assert keys(path) == {"k0", "k2", "k5", "k8"}


def test_partition_stats_of_the_deleted_partitions_are_deleted(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows(range(6), 1))
    write(path, 1, rows([2, 5], 2), "upsert")
    run(
        service_context(HoodieTable.open(str(path)), {"hoodie.metadata.index.column.stats.enable": "true"}),
        "indexing",
        LocalRunner,
    )
    table = HoodieTable.open(str(path))
    assert MetadataPartition.PARTITION_STATS in table.config.metadata_partitions

    def stats() -> dict[str, set[str]]:
        t = HoodieTable.open(str(path))
        found = MetadataTable.open(t, t.reload()).read_partition(MetadataPartition.PARTITION_STATS)
        out: dict[str, set[str]] = {}
        for payload in found.values():
            meta = payload["ColumnStatsMetadata"]
            if not meta["isDeleted"]:
                out.setdefault(meta["fileName"], set()).add(meta["columnName"])
        return out

    before = stats()
    assert set(before) == {"p0", "p1", "p2"}, before

    ttl(path, {DAYS: "10"})

    # HoodieTableMetadataUtil: a DELETE_PARTITION deletes the partitions' stats of every indexed column
    assert stats() == {"p2": before["p2"]}
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5"}


def test_a_cdc_query_over_the_delete_shows_the_partitions_rows_deleted(tmp_path: Path) -> None:
    from hoodie.cdc.reader import read_cdc

    path = tmp_path / "t"
    new_table(
        path,
        table_type=TableType.MERGE_ON_READ,
        extra_properties={
            "hoodie.table.cdc.enabled": "true",
            "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        },
    )
    write(path, 40, rows(range(6), 1))
    write(path, 1, rows([2, 5], 2), "insert")  # new file groups in p2
    last = HoodieTable.open(str(path)).reload().completed().last()
    assert last is not None

    outcome = ttl(path, {DAYS: "10"})

    assert planned(outcome) == ["p0", "p1"]
    changes = read_cdc(HoodieTable.open(str(path)), last.requested_time).to_pylist()
    # HoodieCDCExtractor's REPLACE_COMMIT case: every row of a replaced file group's slice, deleted
    assert sorted((c["op"], json.loads(c["before"])["id"]) for c in changes) == [
        ("d", f"k{i}") for i in (0, 1, 3, 4)
    ]
    assert all(c["after"] is None for c in changes)


def test_inline_ttl_runs_after_a_writers_commit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    new_table(path, table_type=TableType.COPY_ON_WRITE)
    write(path, 40, rows(range(6), 1))
    HoodieWriter(HoodieTable.open(str(path)), write_props={DAYS: "10"}).upsert(rows([2], 2))
    assert keys(path) == {f"k{i}" for i in range(6)}  # not inline: nothing deleted

    inline = {DAYS: "10", "hoodie.partition.ttl.inline": "true"}
    HoodieWriter(HoodieTable.open(str(path)), write_props=inline).upsert(rows([5], 3))

    timeline = HoodieTable.open(str(path)).reload()
    last = timeline.completed().last()
    assert last is not None and last.action is Action.REPLACE_COMMIT  # the TTL commit follows the write
    assert keys(path) == hudi_rs_keys(path) == {"k2", "k5"}
