"""Instants: an action in a state at a requested time, and their file names in both layouts.

Layout 1 (table version 6) keeps every state file in ``.hoodie/`` as ``T.action[.state]``.
Layout 2 (table versions 8, 9) keeps them in ``.hoodie/timeline/`` and names completed instants
``T_C.action`` with the completion time ``C``. In both layouts an inflight commit is ``T.inflight``,
a completed compaction is a ``commit``, a completed log compaction a ``deltacommit``, and (layout 2)
a completed clustering a ``replacecommit``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from hoodie.timeline.instant_time import normalize


class Action(StrEnum):
    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLUSTERING = "clustering"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"

    @property
    def completed_action(self) -> Action:
        """The action a completed instant of this action is written as."""
        return _COMPLETED_AS.get(self, self)

    @property
    def is_write(self) -> bool:
        """Actions that produce data files (what Hudi's commits timeline holds)."""
        return self in _WRITE_ACTIONS


def action_group(action: Action) -> Action:
    """Hudi's comparable action: a pending table service and the action it completes as share one.

    One requested time holds one instant per group; a savepoint, for example, reuses the
    requested time of the commit it saves.
    """
    return _COMPLETED_AS.get(action, action)


_COMPLETED_AS = {
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
    Action.CLUSTERING: Action.REPLACE_COMMIT,
}
_WRITE_ACTIONS = frozenset(
    {
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.REPLACE_COMMIT,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.CLUSTERING,
    }
)


class State(IntEnum):
    """Instant states, ordered: a transition only ever moves to a greater state."""

    REQUESTED = 1
    INFLIGHT = 2
    COMPLETED = 3


@dataclass(frozen=True, slots=True)
class Instant:
    """One instant of the timeline: ``action`` in ``state`` requested at ``requested_time``.

    ``completion_time`` is set for completed instants of layout 2 (from the file name) and,
    for legacy names without it, from the file's modification time (``is_legacy``).
    """

    requested_time: str
    action: Action
    state: State
    completion_time: str | None = None
    is_legacy: bool = False

    @property
    def sort_key(self) -> tuple[str, int, str]:
        return (normalize(self.requested_time), int(self.state), self.action.value)

    def __lt__(self, other: Instant) -> bool:
        return self.sort_key < other.sort_key

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    def with_state(self, state: State, completion_time: str | None = None) -> Instant:
        action = self.action.completed_action if state is State.COMPLETED else self.action
        return Instant(self.requested_time, action, state, completion_time)

    def file_name(self, layout: int) -> str:
        return instant_file_name(self, layout)

    def __str__(self) -> str:
        done = f"_{self.completion_time}" if self.completion_time else ""
        return f"[{self.requested_time}{done}__{self.action.value}__{self.state.name}]"


_REQUESTED_EXT = ".requested"
_INFLIGHT_EXT = ".inflight"
# Layout 2: <requested>[_<completed>].<action>[.<state>]; layout 1 has no completion part.
_NAME_RE = re.compile(r"^(\d+)(?:_(\d+))?\.([a-z]+)(\.(?:requested|inflight))?$")
_BARE_INFLIGHT_RE = re.compile(r"^(\d+)\.inflight$")
_ACTIONS = {a.value: a for a in Action}


def instant_file_name(instant: Instant, layout: int) -> str:
    """The file name of ``instant`` in timeline layout ``layout`` (1 or 2)."""
    ts = instant.requested_time
    action = instant.action
    if instant.state is State.COMPLETED:
        completed = action.completed_action.value
        if layout >= 2:
            if not instant.completion_time:
                raise ValueError(f"completed instant {instant} needs a completion time in layout 2")
            return f"{ts}_{instant.completion_time}.{completed}"
        return f"{ts}.{completed}"
    if instant.state is State.INFLIGHT:
        if action is Action.COMMIT:
            return f"{ts}{_INFLIGHT_EXT}"
        return f"{ts}.{action.value}{_INFLIGHT_EXT}"
    if action is Action.SAVEPOINT:
        raise ValueError(f"savepoint instants have no requested state: {instant}")
    return f"{ts}.{action.value}{_REQUESTED_EXT}"


def parse_instant_file_name(name: str, layout: int) -> Instant | None:
    """Parse a timeline file name; None for anything that is not an instant file."""
    m = _BARE_INFLIGHT_RE.match(name)
    if m:
        return Instant(m.group(1), Action.COMMIT, State.INFLIGHT)
    m = _NAME_RE.match(name)
    if not m:
        return None
    ts, completed, action_name, state_ext = m.groups()
    action = _ACTIONS.get(action_name)
    if action is None:
        return None
    if state_ext == _REQUESTED_EXT:
        return None if completed else Instant(ts, action, State.REQUESTED)
    if state_ext == _INFLIGHT_EXT:
        return None if completed else Instant(ts, action, State.INFLIGHT)
    if completed and layout < 2:
        return None
    return Instant(ts, action, State.COMPLETED, completed)
