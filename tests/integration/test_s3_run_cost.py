"""A compaction's reads on S3, as hts counts them for the run's cost and as the store saw them.

S3 is moto's standalone server, an emulator of the S3 API (:mod:`tests.servers.s3`), behind the
project's counting proxy: every object GET the proxy forwards is a ``read`` request hts counted
(a whole-file read, a ranged read, or a read pyarrow's Parquet reader made through the file
:meth:`FileIO.open_input` returned), and the run read every base and log file of its plan.
"""

from __future__ import annotations

import itertools

import pyarrow.parquet as pq

from hoodie.io import usage
from hoodie.io.fileio import join
from hoodie.io.requests import counting
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.servers.s3 import S3Endpoint, SlowS3
from tests.tables import COALESCE_HOLE, FOOTER_READ, new_table, rows

_names = itertools.count()


def test_a_compaction_on_s3_counts_every_get_the_store_served(s3: S3Endpoint, slow_s3: SlowS3) -> None:
    uri = f"s3://lake/run-cost/t{next(_names)}"
    direct = s3.storage_options()
    writer = HoodieWriter(new_table(uri, **direct))
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(0, 30, 2), 2))
    table = HoodieTable.open(uri, **direct)
    scheduled = schedule_compaction(ServiceContext(table, storage_options=direct), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    plan = table.compaction_plan(scheduled.instant_time, table.reload())
    sizes: dict[str, int] = {}
    for op in plan.operations or ():
        for name in [*(op.delta_file_paths or ()), *([op.data_file_path] if op.data_file_path else [])]:
            path = join(table.base_path, op.partition_path or "", name)
            info = table.fileio.info(path)
            assert info is not None
            sizes[path] = info.size

    slow_s3.proxy.reset()
    with counting() as counter, usage.measure() as used:
        options = slow_s3.endpoint.storage_options()
        slow = HoodieTable.open(uri, **options)
        execute_compaction(
            ServiceContext(slow, storage_options=options), scheduled.instant_time, LocalRunner()
        )
    requests, seen = counter.snapshot(), slow_s3.proxy.counts()

    assert seen["GET"] == requests["read"] > 0, (dict(seen), requests)
    assert used.requests_by_op == requests and used.storage_requests == sum(requests.values())
    assert sizes.keys() <= used.read_from.keys(), "every base and log file of the plan was read"
    for path, size in sizes.items():
        bound = size + FOOTER_READ
        if path.endswith(".parquet"):  # and the holes pre-buffering reads again
            with table.fileio.open_input(path) as f:
                bound += COALESCE_HOLE * pq.ParquetFile(f).metadata.num_row_groups
        assert 0 < used.read_from[path] <= bound, (path, used.read_from[path], size)
    meta = join(slow.base_path, ".hoodie") + "/"
    assert all(p.startswith(meta) for p in used.read_from.keys() - sizes.keys())
    assert used.files_read == len(used.read_from) and used.bytes_read == sum(used.read_from.values())
