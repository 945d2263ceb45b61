"""What an operator asks the daemon through the API: trigger a service, cancel a run, pause and
resume tables (or the whole daemon) and suspended services, take a TrueTime instant. Each checks
the request against the daemon's state and answers with the error the API maps to a status."""

from __future__ import annotations

import logging
import time

from hoodie.errors import HoodieError, InvalidInputError, UnsupportedShapeError, UnsupportedTableError
from hoodie.services.registry import ALL, ServiceKind, names
from service.errors import BadRequest, Conflict, NotFound
from service.queue import WorkItem
from service.registry import TableEntry
from service.runs import CANCELLED, RunLoop, tags
from service.store import Run, RunKind, RunState, RunTrigger, ServiceStreak

log = logging.getLogger("hts.daemon")

TRIGGERABLE = names(triggerable=True)
RUN_NOW = names(plans_on_timeline=False)
"""Services whose plan never goes on the timeline: scheduling and executing are one run."""


def _check_index_request(entry: TableEntry, options: dict[str, str]) -> None:
    """Refuse, before a run is queued, an indexing trigger that asks for nothing hts can build."""
    from hoodie.services.indexing import requested_partitions

    assert entry.table is not None
    try:
        requested_partitions(entry.table, entry.options(options))
    except InvalidInputError as e:
        raise BadRequest(str(e)) from e
    except UnsupportedTableError as e:
        raise Conflict(str(e)) from e


class Operations(RunLoop):
    """The API's operations; :class:`service.daemon.Daemon` owns the state they use."""

    _policy_due: dict[tuple[str, str], float]

    def entry(self, table_id: str) -> TableEntry:
        """The table ``table_id`` (opened if not looked at yet), or :class:`NotFound`."""
        raise NotImplementedError

    def trigger(
        self,
        table_id: str,
        service: str,
        *,
        options: dict[str, str] | None = None,
        instant: str | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[Run, bool]:
        """The REST trigger: schedule now (or take ``instant``) and execute, as one run."""
        if service not in TRIGGERABLE:
            raise BadRequest(f"unknown service {service!r} (known: {', '.join(TRIGGERABLE)})")
        entry = self.entry(table_id)
        if entry.table is None or entry.error is not None:
            raise Conflict(f"table {table_id} cannot be served now: {entry.error or 'not opened yet'}")
        if entry.paused or self.queue.paused:
            raise Conflict(f"table {table_id} is paused; resume it first")
        suspended = self.suspension(table_id, service)
        if suspended is not None:
            raise Conflict(
                f"{service} is suspended on table {table_id} after {suspended.consecutive_failures} "
                f"consecutive failed runs (last: run {suspended.last_run}: {suspended.last_error}); "
                f"resume it first: POST /v1/tables/{table_id}/services/{service}/resume"
            )
        try:
            assert entry.table is not None
            entry.table.shape(entry.options(options)).check(service)
        except UnsupportedShapeError as e:
            raise Conflict(str(e)) from e
        if service == ServiceKind.INDEXING and instant is None:
            _check_index_request(entry, options or {})
        if instant is not None:
            self.gave_up.pop((table_id, instant), None)
        kind = RunKind.RUN if service in RUN_NOW else RunKind.TRIGGER
        item = WorkItem(
            table_id, service, kind, instant, RunTrigger.API, entry.config.priority + 10, dict(options or {})
        )
        return self.submit(item, decision="REST trigger", idempotency_key=idempotency_key)

    def cancel(self, run_id: int) -> Run:
        run = self.store.get(run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        item = self.queue.by_run(run_id)
        if item is None:
            if run.state.finished:
                raise Conflict(f"run {run_id} already ended ({run.state.value})")
            raise Conflict(f"run {run_id} is not queued or running in this replica ({run.replica})")
        self.queue.cancel(run_id)
        if item.target is not None:
            self.gave_up[(item.table_id, item.target)] = CANCELLED.format(run=run_id, service=item.service)
        if not item.running:
            self.store.update(
                run_id, state=RunState.CANCELLED, finished_at=time.time(), error="cancelled before it started"
            )
        log.info(
            "cancel requested for run %d",
            run_id,
            **tags(table=run.table_id, service=run.service, run=run_id),
        )
        updated = self.store.get(run_id)
        assert updated is not None
        return updated

    def pause(self, table_id: str | None = None) -> None:
        if table_id is None:
            self.queue.paused = True
        else:
            self.entry(table_id).paused = True
        log.info("paused %s", table_id or "all tables", **tags(table=table_id))

    def resume(self, table_id: str | None = None) -> None:
        if table_id is None:
            self.queue.paused = False
        else:
            self.entry(table_id).paused = False
        self.queue.wake()
        log.info("resumed %s", table_id or "all tables", **tags(table=table_id))

    def resume_service(self, table_id: str, service: str) -> ServiceStreak:
        """Lift an auto-suspension: the service's pending instants on the table run again."""
        if service not in ALL:
            raise NotFound(f"no service {service!r} (known: {', '.join(ALL)})")
        entry = self.entry(table_id)
        resumed = self.store.resume_service(table_id, service)
        if resumed is None:
            raise Conflict(f"{service} is not suspended on table {table_id}")
        self.streaks[(table_id, service)] = resumed
        for p in entry.watch.pending if entry.watch is not None else ():
            if p.service == service:  # given up on while failing: tried again
                self.gave_up.pop((table_id, p.instant.requested_time), None)
        self._policy_due.pop((table_id, service), None)
        self.queue.wake()
        log.info(
            "%s resumed on %s by an operator",
            service,
            table_id,
            **tags(table=table_id, service=service, decision="resume"),
        )
        return resumed

    def truetime(self, table_id: str, *, lock_held: bool = False) -> str:
        entry = self.entry(table_id)
        if entry.clock is None:
            raise Conflict(f"table {table_id} is not open yet: {entry.error or 'first look pending'}")
        try:
            return str(entry.clock.new_instant_time(lock_held=lock_held))
        except HoodieError as e:
            raise Conflict(f"TrueTime for {table_id}: {e}") from e
