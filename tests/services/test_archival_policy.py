"""Archival's policy: Hudi's keys, their defaults and errors naming the value; the cleaner's
configuration and the compaction trigger widen the keep window; tables Apache Hudi wrote archive up
to their first replace commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.services.archival import ArchivalPolicy, execute_archival, plan_archival
from hoodie.services.base import ServiceContext
from hoodie.timeline.archived_instant import InstantFiles
from hoodie.timeline.instant import Action
from tests.services.archival_support import (
    COMPACT_AFTER,
    OPTIONS,
    Maker,
    ReaderState,
    archived_timeline,
    commit_times,
    open_table,
)

# -- tables Apache Hudi wrote -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["sample_table/cow/v9_txns_simple_nometa", "sample_table/mor/avro/v9_txns_simple_nometa"]
)
def test_hudi_written_tables_archive_up_to_their_first_replace_commit(table_copy: Any, name: str) -> None:
    path: Path = table_copy(name)
    table = open_table(path)
    commits = commit_times(path)
    originals = {ts: InstantFiles.read(table.timeline, ts) for ts in commits}
    first_replace = next(i for i in table.timeline if i.action is Action.REPLACE_COMMIT)
    kept = [ts for ts in commits if ts >= first_replace.requested_time]
    before = ReaderState.of(path, kept)
    options = {
        "hoodie.keep.min.commits": "1",
        "hoodie.keep.max.commits": "2",
        "hoodie.cleaner.commits.retained": "1",
    }
    plan = plan_archival(table, ArchivalPolicy.from_options(options))
    assert plan is not None and plan.retained_from["clustering"] == first_replace.requested_time
    # The cleaner keeps its last commit and one before it: the window widens from 1..2 to 2..3.
    assert (plan.min_instants_to_keep, plan.max_instants_to_keep) == (2, 3)

    archived = execute_archival(ServiceContext(table, options=options)).details["archived_instants"]

    assert archived == [ts for ts in commits if ts < first_replace.requested_time]
    assert ReaderState.of(path, kept) == before
    history = archived_timeline(path)
    assert history.requested_times() == archived
    for ts in archived:  # Hudi's own bytes, verbatim
        got = history.get(ts)
        assert got is not None and got.metadata_payload is not None
        assert got.metadata_payload.raw == originals[ts].completed
    reopened = open_table(path)
    kept_replace = reopened.timeline.get(first_replace.requested_time)
    assert kept_replace is not None
    assert isinstance(reopened.commit_metadata(kept_replace), ReplaceCommitMetadata)


def test_policy_keys_defaults_and_errors_name_the_value() -> None:
    default = ArchivalPolicy.from_options({})
    assert (default.min_commits, default.max_commits, default.archival_batch) == (20, 30, 10)
    assert default.beyond_savepoint is False and default.history_compaction_batch == 10
    with pytest.raises(TableServiceError, match=r"hoodie.keep.max.commits=20 must be greater than"):
        ArchivalPolicy.from_options({"hoodie.keep.min.commits": "20", "hoodie.keep.max.commits": "20"})
    with pytest.raises(TableServiceError, match=r"hoodie.keep.min.commits='ten'"):
        ArchivalPolicy.from_options({"hoodie.keep.min.commits": "ten"})
    with pytest.raises(TableServiceError, match=r"hoodie.archive.beyond.savepoint='yes'"):
        ArchivalPolicy.from_options({"hoodie.archive.beyond.savepoint": "yes"})
    with pytest.raises(TableServiceError, match=r"hoodie.cleaner.policy='KEEP_ALL'"):
        ArchivalPolicy.from_options({"hoodie.cleaner.policy": "KEEP_ALL"})
    # The cleaner settings are read under both spellings, the current one first.
    both = {"hoodie.clean.commits.retained": "7", "hoodie.cleaner.commits.retained": "3"}
    assert ArchivalPolicy.from_options(both).cleaner_commits_retained == 7
    legacy = ArchivalPolicy.from_options({"hoodie.cleaner.policy": "keep_latest_by_hours"})
    assert legacy.cleaner_policy.value == "KEEP_LATEST_BY_HOURS"


def test_the_cleaner_configuration_widens_the_window(table_of: Maker) -> None:
    path = table_of(TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    table = open_table(path)
    # 12 retained commits: the cleaner keeps commits[24:], so 11 after it plus 2 stay: 13..18.
    wide = plan_archival(
        table, ArchivalPolicy.from_options({**OPTIONS, "hoodie.cleaner.commits.retained": "12"})
    )
    assert wide is not None and (wide.min_instants_to_keep, wide.max_instants_to_keep) == (13, 18)
    assert len(wide.instants) == 36 - 13
    by_hours = {
        **OPTIONS,
        "hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS",
        "hoodie.cleaner.hours.retained": "24",
    }
    assert plan_archival(table, ArchivalPolicy.from_options(by_hours)) is None  # every commit is recent
    recent = {**by_hours, "hoodie.cleaner.hours.retained": "0"}
    plan = plan_archival(table, ArchivalPolicy.from_options(recent))
    assert plan is not None and len(plan.instants) == 26


def test_compaction_trigger_keeps_the_delta_commits_it_counts(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.NINE)
    commits = commit_times(path)
    compaction = commits[COMPACT_AFTER + 1]
    # 20 delta commits since the compaction, fewer than a trigger of 21: the compaction stays.
    options = {**OPTIONS, "hoodie.compact.inline.max.delta.commits": "21"}
    plan = plan_archival(open_table(path), ArchivalPolicy.from_options(options))
    assert plan is not None and plan.requested_times == commits[: COMPACT_AFTER + 1]
    assert plan.retained_from["compactionTrigger"] == compaction
    # A time-based trigger does not count delta commits.
    timed = {**options, "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"}
    plan = plan_archival(open_table(path), ArchivalPolicy.from_options(timed))
    assert plan is not None and len(plan.instants) == 27
