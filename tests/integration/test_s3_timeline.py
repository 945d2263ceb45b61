"""The counting proxy, and timeline transitions on S3 as conditional PUTs that never overwrite.

S3 here is moto's standalone server, an emulator of the S3 API (:mod:`tests.servers.s3`), reached
through the project's own proxy (:mod:`tests.servers.proxy`) adding latency and counting requests.
"""

from __future__ import annotations

import time

import pytest

import jobs  # noqa: F401  (registers S3's conditional PUT with hoodie's FileIO)
from hoodie.io.fileio import ArrowFileIO, FileIO
from hoodie.table import HoodieTable
from hoodie.timeline.instant import State
from hoodie.timeline.timeline import InstantExistsError
from hoodie.write.writer import HoodieWriter
from jobs.objectstore import S3ConditionalPut
from tests.servers.proxy import S3Proxy, operation
from tests.servers.s3 import S3Endpoint, SlowS3
from tests.tables import new_table, rows


def test_the_proxy_counts_each_s3_operation_and_adds_its_latency(slow_s3: SlowS3) -> None:
    client = slow_s3.endpoint.client()
    proxy = slow_s3.proxy
    try:
        proxy.reset()
        started = time.monotonic()
        client.put_object(Bucket="lake", Key="count/a", Body=b"a" * 1000)
        client.put_object(Bucket="lake", Key="count/b", Body=b"b")
        client.get_object(Bucket="lake", Key="count/a")["Body"].read()
        client.head_object(Bucket="lake", Key="count/b")
        client.list_objects_v2(Bucket="lake", Prefix="count/")
        client.copy_object(Bucket="lake", Key="count/c", CopySource={"Bucket": "lake", "Key": "count/a"})
        client.delete_object(Bucket="lake", Key="count/c")
        client.delete_objects(Bucket="lake", Delete={"Objects": [{"Key": "count/a"}, {"Key": "count/b"}]})
        elapsed = time.monotonic() - started
    finally:
        client.close()
    expected = {"PUT": 2, "GET": 1, "HEAD": 1, "LIST": 1, "COPY": 1, "DELETE": 1, "DELETE_OBJECTS": 1}
    assert proxy.counts() == expected
    assert elapsed >= 8 * proxy.latency_s
    assert [s.path for s in proxy.seen()][:2] == ["/lake/count/a", "/lake/count/b"]


def test_operations_are_named_from_method_query_and_path() -> None:
    assert operation("GET", "/lake?list-type=2&prefix=t%2F", {}) == "LIST"
    assert operation("GET", "/lake/t/.hoodie/x.commit", {}) == "GET"
    assert operation("PUT", "/lake/t/f?partNumber=1&uploadId=u", {}) == "UPLOAD_PART"
    assert operation("POST", "/lake/t/f?uploads", {}) == "CREATE_MULTIPART"
    assert operation("POST", "/lake/t/f?uploadId=u", {}) == "COMPLETE_MULTIPART"
    assert operation("DELETE", "/lake/t/f?uploadId=u", {}) == "ABORT_MULTIPART"
    assert operation("POST", "/", {"x-amz-target": "DynamoDB_20120810.PutItem"}) == "PutItem"


def test_a_cut_proxy_makes_the_store_unreachable(s3: S3Endpoint) -> None:
    proxy = S3Proxy(s3.endpoint_url)
    fileio, path = FileIO.for_uri("s3://lake/cut", **s3.behind(proxy).storage_options())
    fileio.write_bytes(f"{path}/f", b"x")
    proxy.cut()
    with pytest.raises(OSError):
        fileio.read_bytes(f"{path}/f")


def _completed_instant(table: HoodieTable) -> tuple[str, bytes]:
    timeline = table.reload()
    done = timeline.completed().instants[-1]
    name = timeline.state_file(done.requested_time, State.COMPLETED, done.action)
    assert name is not None
    path = timeline.path_of(name)
    return path, table.fileio.read_bytes(path)


def test_a_second_writer_cannot_overwrite_a_completed_instant_on_s3(slow_s3: SlowS3) -> None:
    uri = "s3://lake/tables/conditional"
    options = slow_s3.endpoint.storage_options()
    table = new_table(uri, **options)
    assert isinstance(table.fileio, ArrowFileIO)
    assert isinstance(table.fileio.conditional_put, S3ConditionalPut)
    HoodieWriter(table).insert(rows(range(6), 1))
    first = HoodieTable.open(uri, **options)
    path, content = _completed_instant(first)

    # A second writer, with its own connection to the store, writes the same completed instant.
    second = HoodieTable.open(uri, **options)
    slow_s3.proxy.reset()
    with pytest.raises(FileExistsError, match="conditional PUT refused"):
        second.fileio.create_new(path, b'{"overwritten": true}')
    # One conditional PUT, refused by the store itself: no look before it.
    assert [(s.op, s.path, s.if_none_match) for s in slow_s3.proxy.seen()] == [("PUT", f"/{path}", "*")]
    assert second.fileio.read_bytes(path) == content

    # Through the timeline the same attempt is refused as an existing instant, and nothing changes.
    timeline = second.reload()
    done = timeline.completed().instants[-1]
    with pytest.raises(InstantExistsError):
        timeline._create(done, b'{"overwritten": true}')
    assert second.fileio.read_bytes(path) == content
    assert HoodieTable.open(uri, **options).reload().completed().instants[-1] == done


def test_every_timeline_transition_of_a_write_is_a_conditional_put(slow_s3: SlowS3) -> None:
    uri = "s3://lake/tables/transitions"
    options = slow_s3.endpoint.storage_options()
    table = new_table(uri, **options)
    slow_s3.proxy.reset()
    HoodieWriter(table).insert(rows(range(6), 1))
    timeline_puts = [s for s in slow_s3.proxy.seen() if s.op == "PUT" and "/.hoodie/timeline/" in s.path]
    names = [s.path.rsplit("/", 1)[-1] for s in timeline_puts if "/.hoodie/metadata/" not in s.path]
    assert {s.if_none_match for s in timeline_puts} == {"*"}, names  # the metadata table's too
    assert [n.split(".")[-1] for n in names] == ["requested", "inflight", "deltacommit"], names


def test_a_store_without_conditional_writes_falls_back_to_check_then_write(s3: S3Endpoint) -> None:
    class NotImplementedPut(S3ConditionalPut):
        def put_if_absent(self, path: str, data: bytes) -> bool:
            return False  # what a 501 from the store makes it answer

    fileio, path = FileIO.for_uri("s3://lake/fallback", **s3.storage_options())
    assert isinstance(fileio, ArrowFileIO)
    fileio.conditional_put = NotImplementedPut({})
    fileio.create_new(f"{path}/i.commit", b"one")
    with pytest.raises(FileExistsError):
        fileio.create_new(f"{path}/i.commit", b"two")
    assert fileio.read_bytes(f"{path}/i.commit") == b"one"
