"""The active timeline: an immutable, ordered view of instants, and the storage it lives in.

Each requested time appears once, in its highest state, exactly as Hudi's timeline loader does;
the individual state files (requested, inflight, completed) stay reachable for their payloads.
Transitions create new files atomically and never overwrite or re-complete an instant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from hoodie.errors import InstantExistsError, TimelineError
from hoodie.io.fileio import FileInfo, FileIO, join
from hoodie.timeline.instant import (
    Action,
    Instant,
    State,
    action_group,
    instant_file_name,
    parse_instant_file_name,
)
from hoodie.timeline.instant_time import instant_from_epoch_millis, normalize
from hoodie.timeline.layout import TablePaths


class Timeline:
    """An ordered, immutable collection of instants (one per requested time)."""

    __slots__ = ("_by_time", "_instants")

    def __init__(self, instants: Iterable[Instant]) -> None:
        self._instants: tuple[Instant, ...] = tuple(sorted(instants))
        by_time: dict[str, list[Instant]] = {}
        for i in self._instants:
            by_time.setdefault(normalize(i.requested_time), []).append(i)
        # Write actions first: a bare lookup by time means the commit, not a savepoint of it.
        self._by_time: dict[str, tuple[Instant, ...]] = {
            k: tuple(sorted(v, key=lambda i: not i.action.is_write)) for k, v in by_time.items()
        }

    # -- collection protocol ------------------------------------------------------------------
    @property
    def instants(self) -> tuple[Instant, ...]:
        return self._instants

    def __iter__(self) -> Iterator[Instant]:
        return iter(self._instants)

    def __len__(self) -> int:
        return len(self._instants)

    def __bool__(self) -> bool:
        return bool(self._instants)

    def __repr__(self) -> str:
        return f"Timeline({', '.join(str(i) for i in self._instants)})"

    # -- filters ------------------------------------------------------------------------------
    def filter(self, predicate: Callable[[Instant], bool]) -> Timeline:
        return Timeline(i for i in self._instants if predicate(i))

    def actions(self, *actions: Action) -> Timeline:
        wanted = set(actions)
        return self.filter(lambda i: i.action in wanted)

    def completed(self) -> Timeline:
        return self.filter(lambda i: i.is_completed)

    def pending(self) -> Timeline:
        return self.filter(lambda i: not i.is_completed)

    def requested(self) -> Timeline:
        return self.filter(lambda i: i.is_requested)

    def inflight(self) -> Timeline:
        return self.filter(lambda i: i.is_inflight)

    def writes(self) -> Timeline:
        """Commits, delta commits, replace commits and pending compaction/clustering."""
        return self.filter(lambda i: i.action.is_write)

    def pending_compaction(self) -> Timeline:
        return self.filter(lambda i: i.action is Action.COMPACTION and not i.is_completed)

    def pending_log_compaction(self) -> Timeline:
        return self.filter(lambda i: i.action is Action.LOG_COMPACTION and not i.is_completed)

    def after(self, ts: str, *, inclusive: bool = False) -> Timeline:
        key = normalize(ts)
        if inclusive:
            return self.filter(lambda i: normalize(i.requested_time) >= key)
        return self.filter(lambda i: normalize(i.requested_time) > key)

    def before(self, ts: str, *, inclusive: bool = False) -> Timeline:
        key = normalize(ts)
        if inclusive:
            return self.filter(lambda i: normalize(i.requested_time) <= key)
        return self.filter(lambda i: normalize(i.requested_time) < key)

    def between(self, start_exclusive: str | None, end_inclusive: str | None) -> Timeline:
        out = self
        if start_exclusive is not None:
            out = out.after(start_exclusive)
        if end_inclusive is not None:
            out = out.before(end_inclusive, inclusive=True)
        return out

    # -- lookups ------------------------------------------------------------------------------
    def get(self, requested_time: str, action: Action | None = None) -> Instant | None:
        """The instant requested at ``requested_time``: of ``action``'s group, or preferably a write."""
        found = self._by_time.get(normalize(requested_time), ())
        if action is None:
            return found[0] if found else None
        group = action_group(action)
        return next((i for i in found if action_group(i.action) is group), None)

    def __contains__(self, requested_time: object) -> bool:
        return isinstance(requested_time, str) and normalize(requested_time) in self._by_time

    def is_completed(self, requested_time: str) -> bool:
        instant = self.get(requested_time)
        return instant is not None and instant.is_completed

    def completion_time(self, requested_time: str) -> str | None:
        instant = self.get(requested_time)
        if instant is None or not instant.is_completed:
            return None
        return instant.completion_time or instant.requested_time

    def first(self) -> Instant | None:
        return self._instants[0] if self._instants else None

    def last(self) -> Instant | None:
        return self._instants[-1] if self._instants else None

    def requested_times(self) -> list[str]:
        return [i.requested_time for i in self._instants]


@dataclass(frozen=True)
class _StateFiles:
    """The on-disk state files of one requested time: state -> (file name, mtime ms, size)."""

    files: dict[State, tuple[str, int, int]] = field(default_factory=dict)


class ActiveTimeline(Timeline):
    """The active timeline of a table as read from storage, with its transitions."""

    __slots__ = ("_files", "fileio", "paths", "tz")

    def __init__(
        self,
        fileio: FileIO,
        paths: TablePaths,
        tz: dt.tzinfo,
        instants: Iterable[Instant],
        files: dict[tuple[str, Action], _StateFiles],
    ) -> None:
        super().__init__(instants)
        self.fileio = fileio
        self.paths = paths
        self.tz = tz
        self._files = files

    @classmethod
    def load(
        cls, fileio: FileIO, paths: TablePaths, tz: dt.tzinfo, listing: list[FileInfo] | None = None
    ) -> ActiveTimeline:
        """List the timeline folder and keep each requested time in its highest state; ``listing``
        is that folder's listing when the caller has just made it (one listing, not two)."""
        files: dict[tuple[str, Action], _StateFiles] = {}
        best: dict[tuple[str, Action], Instant] = {}
        for entry in fileio.list_dir(paths.timeline) if listing is None else listing:
            if entry.is_dir:
                continue
            instant = parse_instant_file_name(entry.name, paths.layout)
            if instant is None:
                continue
            if instant.is_completed and instant.completion_time is None and paths.layout >= 2:
                # A legacy name without completion time: Hudi takes the file's modification time.
                ct = instant_from_epoch_millis(entry.mtime_ms, tz)
                instant = Instant(instant.requested_time, instant.action, instant.state, ct, is_legacy=True)
            key = (normalize(instant.requested_time), action_group(instant.action))
            files.setdefault(key, _StateFiles()).files[instant.state] = (
                entry.name,
                entry.mtime_ms,
                entry.size,
            )
            current = best.get(key)
            if current is None or instant.state > current.state:
                best[key] = instant
        return cls(fileio, paths, tz, best.values(), files)

    def reload(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.fileio, self.paths, self.tz)

    @property
    def layout(self) -> int:
        return self.paths.layout

    # -- state files --------------------------------------------------------------------------
    def _entry(self, requested_time: str, action: Action | None) -> _StateFiles | None:
        instant = self.get(requested_time, action)
        if instant is None:
            return None
        return self._files.get((normalize(requested_time), action_group(instant.action)))

    def state_file(self, requested_time: str, state: State, action: Action | None = None) -> str | None:
        """The file name holding ``state`` of ``requested_time`` (of ``action``'s group), if present."""
        entry = self._entry(requested_time, action)
        if entry is None or state not in entry.files:
            return None
        return entry.files[state][0]

    def state_file_mtime_ms(
        self, requested_time: str, state: State, action: Action | None = None
    ) -> int | None:
        entry = self._entry(requested_time, action)
        if entry is None or state not in entry.files:
            return None
        return entry.files[state][1]

    def states_of(self, requested_time: str, action: Action | None = None) -> tuple[State, ...]:
        entry = self._entry(requested_time, action)
        return tuple(sorted(entry.files)) if entry else ()

    def read_state(self, requested_time: str, state: State, action: Action | None = None) -> bytes:
        """The payload bytes of one state file (``TimelineError`` if that state has no file)."""
        name = self.state_file(requested_time, state, action)
        if name is None:
            raise TimelineError(
                f"instant {requested_time} has no {state.name.lower()} file in {self.paths.timeline}"
            )
        return self.fileio.read_bytes(join(self.paths.timeline, name))

    def path_of(self, name: str) -> str:
        return join(self.paths.timeline, name)

    # -- transitions --------------------------------------------------------------------------
    def _create(self, instant: Instant, payload: bytes) -> None:
        name = instant_file_name(instant, self.layout)
        try:
            self.fileio.create_new(self.path_of(name), payload)
        except FileExistsError as e:
            raise InstantExistsError(
                f"{self.path_of(name)} already exists; instants are never overwritten"
            ) from e

    def create_requested(self, instant: Instant, payload: bytes = b"") -> Instant:
        """Write ``T.action.requested``; the requested time must be new to the timeline."""
        if instant.requested_time in self:
            raise InstantExistsError(
                f"instant {instant.requested_time} already exists on {self.paths.timeline}"
            )
        requested = Instant(instant.requested_time, instant.action, State.REQUESTED)
        self._create(requested, payload)
        return requested

    def create_inflight(self, instant: Instant, payload: bytes = b"") -> Instant:
        """Write an inflight file with no requested state (how a savepoint starts)."""
        if self.reload().get(instant.requested_time, instant.action) is not None:
            raise InstantExistsError(
                f"a {instant.action.value} at {instant.requested_time} already exists "
                f"on {self.paths.timeline}"
            )
        inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
        self._create(inflight, payload)
        return inflight

    def transition_to_inflight(self, instant: Instant, payload: bytes = b"") -> Instant:
        """Write the inflight file of a requested instant."""
        current = self._require_current(instant)
        if current.state is not State.REQUESTED:
            raise TimelineError(f"cannot move {current} to INFLIGHT: it is not REQUESTED")
        inflight = Instant(instant.requested_time, current.action, State.INFLIGHT)
        self._create(inflight, payload)
        return inflight

    def complete(self, instant: Instant, payload: bytes, completion_time: str | None) -> Instant:
        """Write the completed file of an inflight instant (with ``_C`` in layout 2)."""
        current = self._require_current(instant)
        if current.state is not State.INFLIGHT:
            raise TimelineError(f"cannot complete {current}: it is not INFLIGHT")
        if self.layout >= 2 and not completion_time:
            raise TimelineError(f"completing {current} in timeline layout 2 needs a completion time")
        if self._completed_on_storage(instant.requested_time, current.action):
            raise InstantExistsError(f"instant {instant.requested_time} is already completed")
        done = Instant(
            instant.requested_time,
            current.action.completed_action,
            State.COMPLETED,
            completion_time if self.layout >= 2 else None,
        )
        self._create(done, payload)
        return done

    def _completed_on_storage(self, requested_time: str, action: Action) -> bool:
        group = action_group(action)
        for entry in self.fileio.list_dir(self.paths.timeline):
            inst = parse_instant_file_name(entry.name, self.layout)
            if (
                inst is not None
                and inst.is_completed
                and normalize(inst.requested_time) == normalize(requested_time)
                and action_group(inst.action) is group
            ):
                return True
        return False

    def _require_current(self, instant: Instant) -> Instant:
        """The instant's latest state, read fresh from storage (other writers may have moved it)."""
        fresh = self.reload().get(instant.requested_time, instant.action)
        if fresh is None:
            raise TimelineError(
                f"instant {instant.requested_time} is not on the timeline {self.paths.timeline}"
            )
        return fresh

    def delete_state(self, requested_time: str, state: State, action: Action | None = None) -> bool:
        """Remove one state file (used by rollback and by reverting an inflight table service)."""
        fresh = self.reload()
        name = fresh.state_file(requested_time, state, action)
        if name is None:
            return False
        return self.fileio.delete(self.path_of(name))

    def delete_instant(self, requested_time: str, action: Action | None = None) -> None:
        """Remove every state file of a pending instant, inflight first, requested last."""
        fresh = self.reload()
        instant = fresh.get(requested_time, action)
        if instant is None:
            return
        if instant.is_completed:
            raise TimelineError(f"refusing to delete completed instant {instant}; roll it back instead")
        for state in (State.INFLIGHT, State.REQUESTED):
            name = fresh.state_file(requested_time, state, instant.action)
            if name is not None:
                self.fileio.delete(self.path_of(name))
