"""The cleaner's policy: Hudi's cleaner keys (``HoodieCleanConfig``) parsed into one
:class:`CleanPolicy`, and when a clean is due (:class:`CleanTrigger`). The rules a plan applies are
in :mod:`hoodie.services.clean_planner`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from hoodie.models.clean import CleaningPolicy
from hoodie.services.options import bool_option, enum_option, int_option, lookup


class CleanTrigger(StrEnum):
    """``hoodie.clean.trigger.strategy``: Hudi knows only NUM_COMMITS."""

    NUM_COMMITS = "NUM_COMMITS"


# Each setting's keys, the current spelling first, then the spellings Hudi also accepts.
POLICY_KEYS = ("hoodie.clean.policy", "hoodie.cleaner.policy")
COMMITS_RETAINED_KEYS = ("hoodie.clean.commits.retained", "hoodie.cleaner.commits.retained")
HOURS_RETAINED_KEYS = ("hoodie.clean.hours.retained", "hoodie.cleaner.hours.retained")
FILE_VERSIONS_RETAINED_KEYS = ("hoodie.clean.fileversions.retained", "hoodie.cleaner.fileversions.retained")
INCREMENTAL_KEYS = (
    "hoodie.cleaner.incremental.mode",
    "hoodie.clean.incremental.mode",
    "hoodie.cleaner.incremental.enabled",
    "hoodie.clean.incremental.enabled",
)
TRIGGER_KEYS = ("hoodie.clean.trigger.strategy", "hoodie.cleaner.trigger.strategy")
MAX_COMMITS_KEYS = ("hoodie.clean.max.commits", "hoodie.cleaner.trigger.max.commits")
MAX_COMMITS_TO_CLEAN_KEY = "hoodie.clean.max.commits.to.clean"


@dataclass(frozen=True)
class CleanPolicy:
    """How to clean, from Hudi's clean config keys; ``trigger=None`` schedules whenever files are due."""

    policy: CleaningPolicy = CleaningPolicy.KEEP_LATEST_COMMITS
    commits_retained: int = 10
    file_versions_retained: int = 3
    hours_retained: int = 24
    incremental: bool = True
    trigger: CleanTrigger | None = None
    max_commits: int = 1
    max_commits_to_clean: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> CleanPolicy:
        if lookup(options, POLICY_KEYS) is not None:
            policy = enum_option(options, POLICY_KEYS, CleaningPolicy, CleaningPolicy.KEEP_LATEST_COMMITS)
        else:
            # Hudi infers the policy when exactly one retention setting is given.
            given = [
                p
                for p, keys in (
                    (CleaningPolicy.KEEP_LATEST_COMMITS, COMMITS_RETAINED_KEYS),
                    (CleaningPolicy.KEEP_LATEST_BY_HOURS, HOURS_RETAINED_KEYS),
                    (CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, FILE_VERSIONS_RETAINED_KEYS),
                )
                if lookup(options, keys) is not None
            ]
            policy = given[0] if len(given) == 1 else CleaningPolicy.KEEP_LATEST_COMMITS
        trigger: CleanTrigger | None = None
        if lookup(options, TRIGGER_KEYS) is not None:
            trigger = enum_option(options, TRIGGER_KEYS, CleanTrigger, CleanTrigger.NUM_COMMITS)
        elif lookup(options, MAX_COMMITS_KEYS) is not None:
            trigger = CleanTrigger.NUM_COMMITS
        incremental = bool_option(options, INCREMENTAL_KEYS, True)
        return cls(
            policy=policy,
            commits_retained=int_option(options, COMMITS_RETAINED_KEYS, 10, 0),
            # Zero versions would delete the latest slice of every file group: refused.
            file_versions_retained=int_option(options, FILE_VERSIONS_RETAINED_KEYS, 3, 1),
            hours_retained=int_option(options, HOURS_RETAINED_KEYS, 24, 0),
            incremental=incremental,
            trigger=trigger,
            max_commits=int_option(options, MAX_COMMITS_KEYS, 1, 0),
            max_commits_to_clean=(
                int_option(options, MAX_COMMITS_TO_CLEAN_KEY, 0, 1)
                if MAX_COMMITS_TO_CLEAN_KEY in options
                else None
            ),
        )
