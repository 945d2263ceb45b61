"""Plan/metadata models against the instant files Apache Hudi wrote into the fixture tables."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.errors import MalformedPlanError, SchemaError, UnsupportedTableError
from hoodie.models import codec
from hoodie.models.archived import (
    ArchivedMetaEntry,
    CompactionMetadata,
    CompactionWriteStat,
    LSMTimelineInstant,
)
from hoodie.models.base import AvroRecord, camel_case
from hoodie.models.clean import (
    ActionInstant,
    CleanerPlan,
    CleanFileInfo,
    CleanMetadata,
    CleanPartitionMetadata,
)
from hoodie.models.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata, RuntimeStats, WriteStat
from hoodie.models.compaction import CompactionOperation, CompactionPlan
from hoodie.models.index import IndexCommitMetadata, IndexPartitionInfo, IndexPlan
from hoodie.models.restore import RestoreMetadata, RestorePlan
from hoodie.models.rollback import (
    InstantInfo,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
)
from hoodie.models.savepoint import SavepointMetadata, SavepointPartitionMetadata
from tests.conftest import fixture_names, fixture_path

VERSIONS = (6, 8, 9)
_INSTANT_FILE = re.compile(r"^(?P<time>\d+)(?:_(?P<completion>\d+))?\.(?P<suffix>[a-z.]+)$")

# instant-file suffix (action[.state]) -> model; see hudi-format.md §1.3/§1.4
MODEL_BY_SUFFIX: dict[str, type[AvroRecord]] = {
    "commit": CommitMetadata,
    "deltacommit": CommitMetadata,
    "inflight": CommitMetadata,
    "deltacommit.inflight": CommitMetadata,
    "replacecommit.inflight": CommitMetadata,
    "replacecommit": ReplaceCommitMetadata,
    "replacecommit.requested": RequestedReplaceMetadata,
    "clustering.requested": RequestedReplaceMetadata,
    "compaction.requested": CompactionPlan,
    "logcompaction.requested": CompactionPlan,
    "clean.requested": CleanerPlan,
    "clean.inflight": CleanerPlan,
    "clean": CleanMetadata,
    "rollback.requested": RollbackPlan,
    "rollback": RollbackMetadata,
    "indexing.requested": IndexPlan,
    "indexing": IndexCommitMetadata,
    "savepoint": SavepointMetadata,
    "restore.requested": RestorePlan,
    "restore": RestoreMetadata,
}


@dataclass(frozen=True)
class InstantFile:
    path: Path
    table_version: int
    model: type[AvroRecord]
    data: bytes


def _table_version(table: Path) -> int:
    text = (table / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8")
    match = re.search(r"^hoodie\.table\.version=(\d+)$", text, re.MULTILINE)
    assert match, f"no hoodie.table.version in {table}"
    return int(match.group(1))


def _instant_files(table: Path) -> Iterator[InstantFile]:
    """Non-empty instant files of ``table`` and of its metadata table."""
    for base in (table, table / ".hoodie" / "metadata"):
        if not (base / ".hoodie" / "hoodie.properties").is_file():
            continue
        version = _table_version(base)
        timeline = base / ".hoodie" if version < 8 else base / ".hoodie" / "timeline"
        for path in sorted(timeline.iterdir()):
            match = _INSTANT_FILE.match(path.name)
            if not path.is_file() or match is None:
                continue
            data = path.read_bytes()
            if data:
                yield InstantFile(path, version, MODEL_BY_SUFFIX[match.group("suffix")], data)


def _read_long(buf: io.BytesIO) -> int:
    shift = result = 0
    while True:
        byte = buf.read(1)[0]
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1)


@dataclass(frozen=True)
class Container:
    """The framing of a one-block Avro object container file."""

    metadata: dict[str, bytes]
    sync: bytes
    count: int
    datum: bytes
    trailing_sync: bytes
    rest: bytes


def _parse_container(data: bytes) -> Container:
    buf = io.BytesIO(data)
    assert buf.read(4) == codec.AVRO_MAGIC
    metadata: dict[str, bytes] = {}
    while (entries := _read_long(buf)) != 0:
        for _ in range(entries):
            key = buf.read(_read_long(buf)).decode()
            metadata[key] = buf.read(_read_long(buf))
    sync = buf.read(16)
    count = _read_long(buf)
    datum = buf.read(_read_long(buf))
    return Container(metadata, sync, count, datum, buf.read(16), buf.read())


def _strip_doc(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_doc(v) for k, v in value.items() if k != "doc"}
    if isinstance(value, list):
        return [_strip_doc(v) for v in value]
    return value


def _plain_fastavro(data: bytes) -> dict[str, Any]:
    """Decode with nothing but the writer schema embedded in the file (what any Avro reader does)."""
    records = list(fastavro.reader(io.BytesIO(data)))
    assert len(records) == 1 and isinstance(records[0], dict)
    return records[0]


# ----------------------------------------------------------------------------------------------
# every instant file of every fixture table


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_instant_files_round_trip(fixture_root: Path, name: str) -> None:
    files = list(_instant_files(fixture_path(fixture_root, name)))
    if name.endswith("_empty"):
        assert files == []
        return
    assert files, f"no instant files found in {name}"
    for item in files:
        model = item.model.from_bytes(item.data, item.table_version, str(item.path))
        ours = model.to_bytes(item.table_version)
        again = item.model.from_bytes(ours, item.table_version, "re-encoded")
        assert again == model, item.path
        if not codec.is_avro_container(item.data):
            # v6 commit metadata JSON: Jackson's pretty printer, byte for byte
            assert item.table_version == 6 and item.model is CommitMetadata, item.path
            assert ours == item.data, item.path
            continue
        theirs, mine = _parse_container(item.data), _parse_container(ours)
        assert set(theirs.metadata) == set(mine.metadata) == {"avro.schema"}, item.path
        their_schema = json.loads(theirs.metadata["avro.schema"])
        assert json.loads(mine.metadata["avro.schema"]) == _strip_doc(their_schema), item.path
        assert (mine.count, mine.datum, mine.rest) == (theirs.count, theirs.datum, theirs.rest), item.path
        assert mine.trailing_sync == mine.sync and theirs.trailing_sync == theirs.sync
        if their_schema == _strip_doc(their_schema):
            # no doc strings to drop: the whole file is Java's, except the random sync marker
            assert ours.replace(mine.sync, theirs.sync) == item.data, item.path
        assert _plain_fastavro(ours) == model.to_avro(), item.path


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_writer_schemas_equal_packaged_schemas(fixture_root: Path, name: str) -> None:
    seen = 0
    for item in _instant_files(fixture_path(fixture_root, name)):
        if not codec.is_avro_container(item.data):
            continue
        with io.BytesIO(item.data) as fh:
            embedded = json.loads(fastavro.reader(fh).metadata["avro.schema"])
        assert _strip_doc(embedded) == codec.load_schema(embedded["name"], item.table_version), item.path
        seen += 1
    assert seen or "v6" in name or "empty" in name


def test_v6_commit_json_has_no_version_key_and_keeps_delta_stats(fixture_root: Path) -> None:
    table = fixture_path(fixture_root, "sample_table/mor/parquet/v6_nonpartitioned_rollback")
    data = (table / ".hoodie" / "20250126060846931.deltacommit").read_bytes()
    metadata = CommitMetadata.from_bytes(data, 6, "20250126060846931.deltacommit")
    stat = next(metadata.write_stats())
    assert stat.is_log_write and stat.log_version == 3 and stat.log_files and len(stat.log_files) == 3
    assert stat.runtime_stats == RuntimeStats(total_scan_time=0, total_create_time=0, total_upsert_time=462)
    assert metadata.schema is not None and json.loads(metadata.schema)["type"] == "record"
    text = metadata.to_bytes(6).decode()
    assert '"version"' not in text and '"recordsStats" : {\n        "val" : null\n      }' in text


def test_replace_commit_and_requested_replace_from_v9_fixture(fixture_root: Path) -> None:
    timeline = (
        fixture_path(fixture_root, "sample_table/mor/avro/v9_txns_simple_meta") / ".hoodie" / "timeline"
    )
    replace = ReplaceCommitMetadata.from_bytes(
        (timeline / "20260307162614221_20260307162615208.replacecommit").read_bytes(), 9
    )
    assert replace.operation_type == "INSERT_OVERWRITE"
    assert replace.replaced_file_ids() == {
        ("region=eu", "5fa27133-7a82-4124-9a6b-8a94c18ff8ef-0"),
        ("region=eu", "c923cb31-a2d3-49c6-8f47-4be96502c239-0"),
    }
    requested = (timeline / "20260307162614221.replacecommit.requested").read_bytes()
    empty = RequestedReplaceMetadata.from_bytes(requested, 9)
    assert empty == RequestedReplaceMetadata.empty() and not empty.is_clustering
    ours = RequestedReplaceMetadata.empty().to_bytes(9)
    assert ours.replace(ours[-16:], requested[-16:]) == requested
    clustering = RequestedReplaceMetadata.from_bytes(
        (timeline / "20260307162619269.clustering.requested").read_bytes(), 9
    )
    assert clustering.is_clustering and clustering.clustering_plan is not None
    assert clustering.clustering_plan.preserve_hoodie_metadata is True
    assert ("region=eu", "c86b1f8f-af9f-4b56-83e7-26cb80673368-0") in clustering.clustering_plan.file_groups()


def test_compaction_plan_from_v8_fixture(fixture_root: Path) -> None:
    timeline = (
        fixture_path(fixture_root, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d") / ".hoodie" / "timeline"
    )
    plan = CompactionPlan.from_bytes((timeline / "20251220210129235.compaction.requested").read_bytes(), 8)
    assert plan.version == 2 and plan.operations and plan.missing_schedule_partitions == []
    assert all(op.data_file_path is None or "/" not in op.data_file_path for op in plan.operations)
    commit = CommitMetadata.from_bytes(
        (timeline / "20251220210129235_20251220210129883.commit").read_bytes(), 8
    )
    assert commit.compacted is True and commit.operation_type == "COMPACT"
    assert {s.file_id for s in commit.write_stats()} == {op.file_id for op in plan.operations}


# ----------------------------------------------------------------------------------------------
# models without fixture files: encode, decode, and read back with plain fastavro


def _write_stat() -> WriteStat:
    return WriteStat(
        file_id="f1",
        path="p/f1_0-1-2_001.parquet",
        prev_commit="null",
        num_writes=3,
        num_inserts=3,
        partition_path="p",
        runtime_stats=RuntimeStats(total_create_time=7),
        cdc_stats={"x": 1},
    )


def _samples() -> list[AvroRecord]:
    instant = InstantInfo(commit_time="002", action="deltacommit")
    rollback = RollbackMetadata(
        start_rollback_time="003",
        time_taken_in_millis=5,
        total_files_deleted=1,
        commits_rollback=["002"],
        partition_metadata={
            "p": RollbackPartitionMetadata(
                partition_path="p", success_delete_files=["/t/p/a"], failed_delete_files=[]
            )
        },
        instants_rollback=[instant],
    )
    cleaner = CleanerPlan(
        earliest_instant_to_retain=ActionInstant(timestamp="001", action="commit", state="COMPLETED"),
        last_completed_commit_timestamp="004",
        policy="KEEP_LATEST_COMMITS",
        file_paths_to_be_deleted_per_partition={
            "p": [CleanFileInfo(file_path="/t/p/a", is_bootstrap_base_file=False)]
        },
        partitions_to_be_deleted=[],
        extra_metadata={"savepointed_timestamps": ""},
    )
    clean = CleanMetadata(
        start_clean_time="005",
        time_taken_in_millis=9,
        total_files_deleted=1,
        earliest_commit_to_retain="001",
        partition_metadata={
            "p": CleanPartitionMetadata(
                partition_path="p",
                policy="KEEP_LATEST_COMMITS",
                delete_path_patterns=["a"],
                success_delete_files=["a"],
                failed_delete_files=[],
            )
        },
        bootstrap_partition_metadata={},
    )
    compaction = CompactionPlan(
        operations=[
            CompactionOperation(
                base_instant_time="001", file_id="f1", partition_path="p", metrics={"TOTAL_IO_MB": 1.5}
            )
        ],
        extra_metadata={},
        missing_schedule_partitions=[],
    )
    clustering = RequestedReplaceMetadata(
        operation_type="CLUSTER",
        clustering_plan=ClusteringPlan(
            input_groups=[
                ClusteringGroup(slices=[SliceInfo(file_id="f1", data_file_path="file:/t/p/f1.parquet")])
            ],
            strategy=ClusteringStrategy(strategy_class_name="S", strategy_params={}),
            extra_metadata={},
            preserve_hoodie_metadata=True,
            missing_schedule_partitions=[],
        ),
        extra_metadata={},
    )
    commit = CommitMetadata(
        partition_to_write_stats={"p": [_write_stat()]}, compacted=False, extra_metadata={}
    )
    replace = ReplaceCommitMetadata(
        partition_to_write_stats={"p": [_write_stat()]},
        operation_type="CLUSTER",
        partition_to_replace_file_ids={"p": ["f0"]},
    )
    savepoint = SavepointMetadata(
        savepointed_by="hts",
        savepointed_at=1700000000,
        comments="",
        partition_metadata={
            "p": SavepointPartitionMetadata(partition_path="p", savepoint_data_file=["a.parquet"])
        },
    )
    return [
        commit,
        replace,
        compaction,
        clustering,
        cleaner,
        clean,
        RollbackPlan(
            instant_to_rollback=instant,
            rollback_requests=[
                RollbackRequest(partition_path="p", file_id="f1", files_to_be_deleted=["/t/p/a"])
            ],
        ),
        rollback,
        IndexPlan(
            index_partition_infos=[
                IndexPartitionInfo(metadata_partition_path="files", index_upto_instant="1")
            ]
        ),
        IndexCommitMetadata(index_partition_infos=[IndexPartitionInfo(metadata_partition_path="files")]),
        savepoint,
        RestorePlan(instants_to_rollback=[instant], savepoint_to_restore_timestamp="001"),
        RestoreMetadata(
            start_restore_time="006",
            time_taken_in_millis=1,
            instants_to_rollback=["002"],
            hoodie_restore_metadata={"002": [rollback, None]},
            restore_instant_info=[instant],
        ),
        ArchivedMetaEntry(
            hoodie_commit_metadata=commit,
            hoodie_clean_metadata=clean,
            hoodie_compaction_metadata=CompactionMetadata(
                partition_to_compaction_write_stats={
                    "p": [
                        CompactionWriteStat(
                            partition_path="p",
                            total_log_records=1,
                            total_log_files=1,
                            total_updated_records_compacted=1,
                            hoodie_write_stat=_write_stat(),
                        )
                    ]
                }
            ),
            hoodie_rollback_metadata=rollback,
            hoodie_save_point_metadata=savepoint,
            commit_time="001",
            action_type="commit",
            hoodie_compaction_plan=compaction,
            hoodie_cleaner_plan=cleaner,
            action_state="COMPLETED",
            hoodie_replace_commit_metadata=replace,
            hoodie_requested_replace_metadata=clustering,
            hoodie_inflight_replace_metadata=commit,
            hoodie_index_commit_metadata=IndexCommitMetadata(),
            state_transition_time="007",
        ),
        LSMTimelineInstant(
            instant_time="001", completion_time="002", action="commit", metadata=b"Obj\x01", plan=None
        ),
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("model", _samples(), ids=lambda m: type(m).__name__)
def test_models_round_trip_and_read_with_plain_fastavro(model: AvroRecord, version: int) -> None:
    data = model.to_bytes(version)
    back = type(model).from_bytes(data, version, "sample")
    if version == 6 and isinstance(model, CommitMetadata):
        # JSON carries Java's primitives (0, not null) and no Avro-only stat fields; it is a fixed point
        assert isinstance(back, CommitMetadata) and data.startswith(b"{\n  ") and back.to_bytes(6) == data
        stat = next(back.write_stats())
        assert (stat.file_id, stat.num_inserts, stat.num_deletes, stat.cdc_stats) == ("f1", 3, 0, {"x": 1})
        assert stat.runtime_stats == RuntimeStats(total_scan_time=0, total_create_time=7, total_upsert_time=0)
        assert stat.total_log_files is None and back.version == 1
        return
    if version == 6 and "missing_schedule_partitions=[]" in repr(model):
        # table version 6 schemas have no missingSchedulePartitions: the field comes back as its default
        assert "missingSchedulePartitions" not in json.dumps(codec.load_schema(model.AVRO_NAME, 6))
        assert "missing_schedule_partitions=[]" not in repr(back)
    else:
        assert back == model
    container = _parse_container(data)
    assert json.loads(container.metadata["avro.schema"]) == codec.load_schema(model.AVRO_NAME, version)
    plain = _plain_fastavro(data)
    assert type(model).from_avro(plain) == back
    if version != 6:
        assert plain == back.to_avro()


def test_table_version_6_drops_missing_schedule_partitions_and_newer_reader_defaults_it() -> None:
    plan = CompactionPlan(operations=[], missing_schedule_partitions=["p"])
    old = plan.to_bytes(6)
    assert CompactionPlan.from_bytes(old, 6) == CompactionPlan(operations=[])
    assert CompactionPlan.from_bytes(old, 9).missing_schedule_partitions is None
    assert CompactionPlan.from_bytes(plan.to_bytes(9), 6).missing_schedule_partitions is None
    clustering = RequestedReplaceMetadata(operation_type="CLUSTER", clustering_plan=ClusteringPlan(version=1))
    decoded = RequestedReplaceMetadata.from_bytes(clustering.to_bytes(6), 8)
    assert decoded.clustering_plan == ClusteringPlan(version=1)


def test_defaults_written_by_us() -> None:
    assert CompactionPlan().version == 2
    assert CleanerPlan(policy="KEEP_LATEST_COMMITS").version == 2
    assert CommitMetadata().version == 1 and RestorePlan().version == 2
    assert RollbackRequest(partition_path="").files_to_be_deleted == []
    assert RequestedReplaceMetadata.empty().to_avro() == {
        "operationType": None,
        "clusteringPlan": None,
        "extraMetadata": None,
        "version": None,
    }
    assert RollbackPlan().to_avro()["RollbackRequests"] is None
    assert "hoodieSavePointMetadata" in ArchivedMetaEntry().to_avro()
    assert camel_case("total_log_read_time_ms") == "totalLogReadTimeMs"


# ----------------------------------------------------------------------------------------------
# schemas


@pytest.mark.parametrize("version", VERSIONS)
def test_every_packaged_schema_is_self_contained_and_doc_free(version: int) -> None:
    names = codec.schema_names()
    assert len(names) == 17
    for name in names:
        schema = codec.load_schema(name, version)
        assert schema["name"] == name and schema["namespace"] == "org.apache.hudi.avro.model"
        assert '"doc"' not in json.dumps(schema)
        fastavro.parse_schema(json.loads(json.dumps(schema)), named_schemas={})


def test_schema_variants_by_table_version() -> None:
    def field_names(schema: dict[str, Any]) -> list[str]:
        return [f["name"] for f in schema["fields"]]

    assert "missingSchedulePartitions" not in field_names(codec.load_schema("HoodieCompactionPlan", 6))
    assert field_names(codec.load_schema("HoodieCompactionPlan", 8))[-1] == "missingSchedulePartitions"
    v6_plan = codec.load_schema("HoodieRequestedReplaceMetadata", 6)["fields"][1]["type"][1]
    assert v6_plan["name"] == "HoodieClusteringPlan" and "missingSchedulePartitions" not in field_names(
        v6_plan
    )
    for version, branches in ((6, 12), (8, 12), (9, 13)):
        delete = codec.load_schema("HoodieDeleteRecordList", version)
        union = delete["fields"][0]["type"]["items"]["fields"][2]["type"]
        names = [b if isinstance(b, str) else b["name"] for b in union]
        assert len(names) == branches and names[:4] == ["null", "BooleanWrapper", "IntWrapper", "LongWrapper"]
        assert names[11] == "TimestampMicrosWrapper"
    assert codec.load_schema("HoodieCleanerPlan", 6) is codec.load_schema("HoodieCleanerPlan", 9)


def test_unknown_schema_or_table_version() -> None:
    with pytest.raises(SchemaError, match="HoodieNoSuchThing"):
        codec.load_schema("HoodieNoSuchThing", 8)
    with pytest.raises(UnsupportedTableError, match="table version 7"):
        codec.load_schema("HoodieCompactionPlan", 7)
    with pytest.raises(UnsupportedTableError, match="table version 5"):
        CommitMetadata().to_bytes(5)


def test_encoding_a_wrong_value_type_raises_schema_error() -> None:
    with pytest.raises(SchemaError, match="HoodieIndexPlan"):
        codec.encode_avro({"version": "one", "indexPartitionInfos": None}, "HoodieIndexPlan", 8)


# ----------------------------------------------------------------------------------------------
# malformed input


def _valid_plan() -> bytes:
    return IndexPlan(index_partition_infos=[IndexPartitionInfo(metadata_partition_path="files")]).to_bytes(8)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="zero-bytes"),
        pytest.param(b"Obj\x02" + _valid_plan()[4:], id="wrong-magic"),
        pytest.param(b"{not json", id="json-where-avro-expected"),
        pytest.param(_valid_plan()[:10], id="truncated-header"),
        pytest.param(_valid_plan()[:-20], id="truncated-block"),
        pytest.param(_valid_plan()[:-5], id="truncated-sync"),
        pytest.param(_valid_plan()[:-16] + b"\x00" * 16, id="bad-sync"),
        pytest.param(codec.AVRO_MAGIC, id="magic-only"),
    ],
)
def test_malformed_avro_names_the_source(data: bytes) -> None:
    with pytest.raises(MalformedPlanError, match=r"t/\.hoodie/timeline/001\.indexing\.requested"):
        IndexPlan.from_bytes(data, 8, "t/.hoodie/timeline/001.indexing.requested")


def test_container_without_records_and_wrong_record_type() -> None:
    header_only = _valid_plan()
    container = _parse_container(header_only)
    cut = header_only.index(container.sync) + 16
    with pytest.raises(MalformedPlanError, match="no HoodieIndexPlan record"):
        IndexPlan.from_bytes(header_only[:cut], 8, "empty-container")
    with pytest.raises(MalformedPlanError, match=r"002\.compaction\.requested"):
        CompactionPlan.from_bytes(header_only, 8, "002.compaction.requested")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="zero-bytes"),
        pytest.param(b'{\n  "partitionToWriteStats" : {', id="truncated-json"),
        pytest.param(b"garbage", id="garbage"),
        pytest.param(b"[1, 2]", id="json-array"),
        pytest.param(b'{"partitionToWriteStats": {"p": 3}}', id="stats-not-lists"),
        pytest.param(b"\xff\xfe{}", id="not-utf8"),
    ],
)
def test_malformed_commit_json_names_the_source(data: bytes) -> None:
    with pytest.raises(MalformedPlanError, match=r"001\.deltacommit"):
        CommitMetadata.from_bytes(data, 6, ".hoodie/001.deltacommit")


def test_missing_required_field_is_malformed() -> None:
    payload = {"startRollbackTime": "1"}
    with pytest.raises(MalformedPlanError, match=r"001\.rollback"):
        RollbackMetadata.from_payload(payload, "001.rollback")


def test_commit_json_is_tolerant_of_unknown_and_missing_keys() -> None:
    data = b'{"partitionToWriteStats": {"": [{"fileId": "f", "futureKey": 1}]}, "writePartitionPaths": [""]}'
    metadata = CommitMetadata.from_bytes(data, 6, "001.commit")
    assert [s.file_id for s in metadata.write_stats()] == ["f"]
    assert metadata.extra_metadata is None and metadata.operation_type is None


def test_commit_json_escapes_strings_like_jackson() -> None:
    schema = '{"a":"b\\\\c"}\t\x1f\u00e9'
    text = CommitMetadata(extra_metadata={"schema": schema}).to_bytes(6).decode("utf-8")
    assert '"schema" : "{\\"a\\":\\"b\\\\\\\\c\\"}\\t\\u001F\u00e9"' in text
    assert CommitMetadata.from_bytes(text.encode(), 6).schema == schema
