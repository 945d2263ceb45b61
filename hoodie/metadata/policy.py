"""How the metadata table's services run, derived from the data table's Hudi keys as Hudi derives
the metadata table's write config (``HoodieMetadataWriteUtils.createMetadataWriteConfig``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from hoodie.models.clean import CleaningPolicy
from hoodie.services.archival import ArchivalPolicy
from hoodie.services.clean import CleanPolicy, CleanTrigger
from hoodie.services.compaction import (
    TriggerStrategy,
)
from hoodie.services.options import int_option

MAX_DELTA_COMMITS_KEY = "hoodie.metadata.compact.max.delta.commits"
DEFAULT_MAX_DELTA_COMMITS = 10
MIN_CLEANER_COMMITS_RETAINED = 20
"""``HoodieMetadataConfig.DEFAULT_METADATA_CLEANER_COMMITS_RETAINED``: the MDT keeps at least this many."""
CLEANER_RETENTION_FACTOR = 1.2
INSTANTS_BEFORE_CLEAN = 3
"""Completed MDT instants needed after the latest compaction before the MDT is cleaned."""


# -- policy -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataTablePolicy:
    """How the MDT services run: :meth:`from_options` derives it from the data table's Hudi keys,
    as Hudi derives the MDT's write config (``HoodieMetadataWriteUtils.createMetadataWriteConfig``)."""

    max_delta_commits: int
    clean: CleanPolicy
    archival: ArchivalPolicy
    instants_before_clean: int = INSTANTS_BEFORE_CLEAN

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> MetadataTablePolicy:
        max_deltas = int_option(options, MAX_DELTA_COMMITS_KEY, DEFAULT_MAX_DELTA_COMMITS, 1)
        data_clean = CleanPolicy.from_options(options)
        clean = CleanPolicy(policy=data_clean.policy, trigger=CleanTrigger.NUM_COMMITS, max_commits=1)
        if data_clean.policy is CleaningPolicy.KEEP_LATEST_COMMITS:
            retained = max(
                MIN_CLEANER_COMMITS_RETAINED, int(data_clean.commits_retained * CLEANER_RETENTION_FACTOR)
            )
            clean = dataclasses.replace(clean, commits_retained=retained)
        elif data_clean.policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS:
            versions = math.ceil(data_clean.file_versions_retained * CLEANER_RETENTION_FACTOR)
            clean = dataclasses.replace(clean, file_versions_retained=versions)
        else:
            hours = math.ceil(data_clean.hours_retained * CLEANER_RETENTION_FACTOR)
            clean = dataclasses.replace(clean, hours_retained=hours)
        data_archival = ArchivalPolicy.from_options(options)
        archival = ArchivalPolicy(
            min_commits=data_archival.min_commits + 1,
            max_commits=data_archival.max_commits + 1,
            cleaner_policy=clean.policy,
            cleaner_commits_retained=clean.commits_retained,
            cleaner_hours_retained=clean.hours_retained,
            compaction_trigger=TriggerStrategy.NUM_COMMITS,
            compaction_max_delta_commits=max_deltas,
        )
        return cls(max_delta_commits=max_deltas, clean=clean, archival=archival)
