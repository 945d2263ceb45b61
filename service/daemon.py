"""The daemon: one object that owns the tables, the watch ticks, the work queue and its workers,
Spark, the locks and the run history, and starts and stops them in order.

Ticks are short and never wait on Spark: the watch tick (its own thread, every poll interval;
one that overruns is followed by the next at once) looks at every table's timeline and queues
what is runnable; policy scheduling queues plan-writing work when a table's interval has passed
(only on the leader when leader election is on); the discovery tick (APScheduler) rescans the
roots. Workers take items from the queue and run
them through the executor, recording one run per piece of work (``service.runs``). Every
decision is one log line.

Stopping (SIGTERM through uvicorn's lifespan, or :meth:`stop`): ticks stop, no new item starts,
running items get the grace period to finish; then they are cancelled, which rolls their
attempts back; locks are released, Spark is stopped and the run history closed, each step
guarded so that one failing cannot skip the rest.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from hoodie.errors import HoodieError, UnsupportedShapeError
from hoodie.io.requests import RequestCounter, counting
from hoodie.services.registry import ALL, spec_of
from hoodie.timeline.timeline import ActiveTimeline
from jobs.objectstore import install as install_conditional_puts
from service.clock import SYSTEM, Clock
from service.errors import NotFound
from service.events import EVENTS
from service.executor import Executor, SparkHolder
from service.health import Health, HealthBook
from service.locks import InProcessServiceLock, LockState, make_lock
from service.metrics import Metrics
from service.operations import RUN_NOW, Operations
from service.queue import WorkItem, WorkQueue
from service.registry import Registry, TableEntry
from service.runs import tags
from service.settings import Settings
from service.store import RunKind, RunStore, RunTrigger
from service.truetime import TableClock, default_skew_ms
from service.watcher import PollPlan, TableWatch, look

log = logging.getLogger("hts.daemon")

DISCOVERY = "_discovery"
"""The ``table`` label of the storage requests of discovery rescans."""


class Daemon(Operations):
    def __init__(
        self, settings: Settings, *, replica_id: str | None = None, clock: Clock | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock or SYSTEM
        # Instant files on S3 are created by conditional PUTs (one request, never overwriting), as
        # in the CLI and on Spark executors; without it (an in-process daemon never imported
        # ``jobs``) they were created by check-then-write, under the table lock only.
        install_conditional_puts()
        self.poll_plan = PollPlan.of(settings.watch)
        self.discovery_requests = RequestCounter()
        """Storage requests of table discovery (``tables.discover``), shared by no one table."""
        self.events: Any = None  # service.events.EventWatcher when watch.events.sqs_queue_url is set
        self._lookers: ThreadPoolExecutor | None = None
        self.replica = replica_id or settings.ha.replica_id or socket.gethostname()
        self.metrics = Metrics()
        self.registry = Registry(settings)
        self.store = RunStore(settings.state_dir, self.replica)
        self.queue = WorkQueue(settings.limits, self._table_limit)
        self.spark = SparkHolder(settings.spark)
        self.executor = Executor(self.spark, self._claim)
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.gave_up: dict[tuple[str, str], str] = {}
        self.streaks = {(s.table_id, s.service): s for s in self.store.streaks()}
        self.health_book = HealthBook()
        self._policy_due: dict[tuple[str, str], float] = {}
        self._refused: dict[str, tuple[object, object, object, dict[str, str]]] = {}
        self._workers: list[threading.Thread] = []
        self._ticker: threading.Thread | None = None
        self._ticks_stop = threading.Event()
        self._submitting = threading.Lock()
        self._closing = threading.Event()
        self.stopping = False
        self.started = False
        self.last_tick: float | None = None
        self.leader: Any = None
        self.metrics.add_state(self.state_snapshot)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        interrupted = self.store.mark_interrupted()
        if interrupted:
            log.warning(
                "%d run(s) of a previous process did not finish; their instants are watched again",
                interrupted,
            )
        if self.settings.ha.leader_election:
            from service.locks.leader import LeaderElection

            url = self.settings.leader_zookeeper_url()
            assert url is not None
            self.leader = LeaderElection(url, self.settings.ha.election_path, self.replica)
            self.leader.add_listener(lambda leads: log.info("leadership: %s", "gained" if leads else "lost"))
            self.leader.start()
        self.discover()
        for n in range(self.settings.limits.max_concurrent):
            worker = threading.Thread(target=self._work, name=f"hts-worker-{n}", daemon=True)
            worker.start()
            self._workers.append(worker)
        common = {"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        self._ticker = threading.Thread(target=self._watch_loop, name="hts-watch", daemon=True)
        self._ticker.start()
        self.scheduler.add_job(
            self.discover,
            "interval",
            seconds=self.settings.tables.rescan_interval_s,
            id="discover",
            **common,
        )
        self.scheduler.start()
        self.start_events()
        self.started = True
        log.info(
            "hts daemon %s started: %d table(s), Spark %s, %d worker(s)",
            self.replica,
            len(self.registry),
            self.settings.spark.master,
            self.settings.limits.max_concurrent,
        )

    def stop(self, grace_s: float | None = None) -> None:
        grace = self.settings.shutdown_grace_s if grace_s is None else grace_s
        self.stopping = True
        steps: list[tuple[str, Callable[[], None]]] = [
            ("stop the event notifications", lambda: self.events.stop() if self.events is not None else None),
            (
                "stop the ticks",
                lambda: self.scheduler.shutdown(wait=False) if self.scheduler.running else None,
            ),
            ("stop the watch ticks", self._stop_ticks),
            ("drain the running work", lambda: self._drain(grace)),
            ("stop the lookers", lambda: self._lookers.shutdown() if self._lookers is not None else None),
            ("stop the workers", self._stop_workers),
            ("leave the leader election", lambda: self.leader.stop() if self.leader is not None else None),
            ("release the locks", self._close_locks),
            ("stop Spark", self.spark.stop),
            ("close the run history", self.store.close),
        ]
        for what, step in steps:
            try:
                step()
            except Exception:
                log.exception("stopping: could not %s", what)
        log.info("hts daemon %s stopped", self.replica)

    def _drain(self, grace: float) -> None:
        self.queue.paused = True
        self.queue.wake()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(i.running for i in self.queue.items()):
            time.sleep(0.1)
        running = [i for i in self.queue.items() if i.running]
        for item in running:
            log.warning(
                "stopping: cancelling %s on %s; its attempt is rolled back",
                item.service,
                item.table_id,
                **tags(table=item.table_id, service=item.service, instant=item.instant, run=item.run_id),
            )
            item.cancel.set()
        for item in running:
            item.done.wait(timeout=max(30.0, grace))

    def _stop_ticks(self) -> None:
        self._ticks_stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=max(30.0, 2 * self.settings.watch.poll_interval_s))

    def _stop_workers(self) -> None:
        self._closing.set()
        self.queue.close()
        for worker in self._workers:
            worker.join(timeout=10)

    def _close_locks(self) -> None:
        for entry in self.registry:
            if entry.lock is not None:
                try:
                    entry.lock.close()
                except Exception:
                    log.exception("could not release the lock of %s", entry.id)

    # -- tables ------------------------------------------------------------------------------

    def _table_limit(self, table_id: str) -> int:
        entry = self.registry.get(table_id)
        return entry.config.max_concurrent if entry is not None else 1

    def _prepare(self, entry: TableEntry) -> None:
        """The table's lock, clock and watch state, once it opened."""
        if entry.lock is not None:
            return
        table = entry.table
        assert table is not None
        options = entry.config.options
        lock = make_lock(
            table_id=entry.id,
            base_path=table.base_path,
            table_name=table.name,
            options=options,
            client_id=f"hts-{self.replica}",
            observer=self.metrics,
            base_uri=entry.uri,
            storage_options=entry.config.storage_options,
        )
        lock.add_state_listener(functools.partial(self._lock_state, entry))
        skew = self.settings.truetime.max_expected_clock_skew_ms
        if skew is None:
            skew = default_skew_ms(isinstance(lock.inner, InProcessServiceLock))
        entry.clock = TableClock(
            entry.id,
            table.fileio,
            table.paths,
            lock,
            table.tz,
            skew_ms=skew,
            observer=self.metrics,
            clock=None if self.clock is SYSTEM else self.clock,
        )
        entry.lock = lock
        entry.watch = TableWatch()

    def _lock_state(self, entry: TableEntry, state: LockState) -> None:
        level = logging.INFO if state is LockState.CONNECTED else logging.WARNING
        what = {
            LockState.CONNECTED: "connected: work resumes",
            LockState.SUSPENDED: "suspended: no new work starts",
            LockState.LOST: "lost: held locks are gone; completing writes refuse",
        }[state]
        log.log(level, "lock of %s %s", entry.id, what, **tags(table=entry.id))
        self.queue.wake()

    # -- ticks --------------------------------------------------------------------------------

    def discover(self) -> None:
        """Apply the static list and rescan the discovery roots (counted as discovery requests)."""
        with counting(self.discovery_requests):
            self.registry.refresh()

    def start_events(self) -> None:
        if not self.settings.watch.events.sqs_queue_url:
            return
        from service.events import EventWatcher

        self.events = EventWatcher(
            self.settings.watch.events, self.registry, self.events_arrived, clock=self.clock
        )
        self.events.start()

    def events_arrived(self, table_ids: set[str]) -> None:
        """Event notifications say these tables changed: look at them now, not at their next poll."""
        leads = self.is_leader
        for table_id in sorted(table_ids):
            entry = self.registry.get(table_id)
            if entry is None:
                continue
            if entry.watch is not None:
                entry.watch.poke()
            self._watch_one(entry, leads)
        self.queue.wake()

    def _watch_loop(self) -> None:
        """A watch tick every ``watch.poll_interval_s`` (the first at once), on a fixed grid.

        A tick that overruns the interval is followed by the next one at once, and the grid moves on
        from there: no tick is skipped (a scheduler that skips a run while the last one still runs
        would leave every table unwatched for a whole extra interval after an overrun).
        """
        poll = self.settings.watch.poll_interval_s
        due = time.monotonic()
        while not self._ticks_stop.is_set():
            try:
                self.watch_tick()
            except Exception:  # the next tick tries again
                if not self._ticks_stop.is_set():
                    log.exception("watch tick failed")
            due = max(due + poll, time.monotonic())
            self._ticks_stop.wait(due - time.monotonic())

    def watch_tick(self) -> None:
        started = self.clock.monotonic()
        leads = self.is_leader
        entries = list(self.registry)
        # A look at an object store mostly waits on requests: looks run on threads. On local disk a
        # look takes microseconds of CPU and waits on nothing; threads only add their own cost
        # (1,000 local tables: 15 -> 24 ms of CPU a tick).
        if self.settings.watch.threads > 1 and len(entries) > 1 and self.registry.any_remote:
            if self._lookers is None:
                self._lookers = ThreadPoolExecutor(self.settings.watch.threads, thread_name_prefix="hts-look")
            list(self._lookers.map(lambda entry: self._watch_one(entry, leads, started), entries))
        else:
            for entry in entries:
                self._watch_one(entry, leads, started)
        took = self.clock.monotonic() - started
        self.metrics.tick_duration.observe(took)
        budget = self.settings.watch.tick_budget_s or self.settings.watch.poll_interval_s
        if took > budget:
            self.metrics.tick_overruns.inc()
            log.warning("watch tick took %.2f s, over its %.2f s budget", took, budget)
        self.last_tick = self.clock.time()
        self.queue.wake()

    def _watch_one(self, entry: TableEntry, leads: bool, tick: float | None = None) -> None:
        """Watch one table; ``tick``: when the watch tick that looks at it started (None: not a tick)."""
        try:
            self._watch(entry, leads, tick)
        except Exception as e:  # this table only; the others are still served
            self.metrics.table_errors.labels(entry.id, type(e).__name__).inc()
            if not isinstance(e, (HoodieError, OSError, ValueError)):
                log.exception("watching %s failed unexpectedly", entry.id, **tags(table=entry.id))
            self.registry.fail(entry, e, self.clock.monotonic())

    def _watch(self, entry: TableEntry, leads: bool, tick: float | None) -> None:
        with counting(entry.requests):
            ended = self.queue.ended(entry.id)
            reloads = entry.watch.reloads if entry.watch is not None else None  # None: not open yet
            # The shape's refusals, asked for at most once a tick: when the timeline changed (GET
            # /v1/tables shows them), when there is something to refuse, or when a policy is due;
            # an idle table on an unchanged timeline, as most are on most ticks, asks nothing.
            refused: dict[str, str] | None = None
            if self._look(entry, tick):
                assert entry.watch is not None
                work = bool(entry.watch.pending or self.gave_up)
                if work or entry.watch.reloads != reloads:
                    refused = self.refused(entry)
                if work and refused is not None:
                    self._queue_pending(entry, refused, ended)
            if leads:
                self._policies(entry, refused)

    def _look(self, entry: TableEntry, tick: float | None = None) -> bool:
        """Open the table if needed and look at it when it is due; True when it was looked at.

        Within a tick, due-ness and the next look are reckoned from the tick's start, not from the
        moment this table's turn came: a sweep of many tables takes a while, and a table looked at
        late in one sweep and early in the next would otherwise not be due yet and wait a whole
        extra interval. Every active table is therefore looked at on every tick.
        """
        now = self.clock.monotonic() if tick is None else tick
        with entry.guard:
            if entry.table is None or entry.error is not None:
                failures = entry.failures
                if not self.registry.open(entry, now):
                    if entry.failures > failures and entry.error_kind:
                        self.metrics.table_errors.labels(entry.id, entry.error_kind).inc()
                    return False
            self._prepare(entry)
            assert entry.table is not None
            # Ticks come every poll interval: a look due within half of one is taken now.
            if not entry.watch.due(now, slack_s=min(0.5, self.poll_plan.poll_interval_s / 2)):
                return False
            changed = look(
                entry.table,
                entry.watch,
                entry.config.heartbeat,
                entry.config.lazy_failed_writes,
                self.clock,
            )
            entry.watch.planned(self.poll_plan, now, changed)
        return True

    def _queue_pending(self, entry: TableEntry, refused: dict[str, str], ended: int) -> None:
        """Queue the runnable pending instants the look found; ``ended``: the table's count of ended
        work items (:meth:`WorkQueue.ended`) taken before the look."""
        assert entry.table is not None
        pending_keys = {(entry.id, p.instant.requested_time) for p in entry.watch.pending}
        for key in [k for k in self.gave_up if k[0] == entry.id and k not in pending_keys]:
            del self.gave_up[key]
        if entry.paused:
            return
        fresh: ActiveTimeline | None = None
        for p in entry.watch.pending:
            key = (entry.id, p.instant.requested_time)
            if not p.runnable or key in self.gave_up or self.queue.find(key) is not None:
                continue
            if p.service in refused:  # the table's shape refuses it: shown in GET /v1/tables/{id}
                continue
            if self.suspension(entry.id, p.service) is not None:  # shown in GET /v1/tables/{id}
                continue
            if self.queue.planning(entry.id, p.service):
                continue  # a run planning this service may have written this plan: it runs it
            if self.queue.ended(entry.id) != ended:
                # A run of ours that planned and carried out this instant may have ended since the
                # look (and left the queue): read the timeline again. Otherwise the look's timeline
                # is as current as one read now would be for our own runs, and other processes'
                # are refused by the claim under the lock (the run is then skipped).
                fresh = fresh or ActiveTimeline.load(entry.table.fileio, entry.table.paths, entry.table.tz)
                still = fresh.get(p.instant.requested_time, p.instant.action)
                if still is None or still.is_completed:
                    continue
            why = "abandoned attempt" if p.abandoned else f"requested {p.age_s:.0f} s ago"
            self.submit(
                WorkItem(
                    entry.id,
                    p.service,
                    RunKind.EXECUTE,
                    p.instant.requested_time,
                    RunTrigger.WATCH,
                    entry.config.priority,
                ),
                decision=why,
            )

    def storage_requests(self, table_id: str) -> dict[str, int]:
        """The storage requests made for ``table_id`` so far, by kind (watching and runs).

        For the requests of one piece of work, count it in its own context instead:
        ``with hoodie.io.requests.counting() as c: ...; c.snapshot()`` (nested inside the table's).
        """
        return self.entry(table_id).requests.snapshot()

    def refused(self, entry: TableEntry) -> dict[str, str]:
        """Service -> why the table's shape (``hoodie.shape``) refuses it; never scheduled or executed."""
        if entry.table is None:  # a shape refused on open refuses every service
            if entry.error is not None and entry.error_kind == UnsupportedShapeError.__name__:
                return dict.fromkeys(ALL, entry.error)
            return {}
        try:
            # Every tick asks: the answer is kept while the table's timeline, its hoodie.properties
            # and the table's settings are the very ones it was computed from (as Table.shape is).
            table = entry.table
            timeline, config = table.timeline, table.config
            known = self._refused.get(entry.id)
            if (
                known is None
                or known[0] is not timeline
                or known[1] is not config
                or known[2] is not entry.config
            ):
                refused = table.shape(entry.config.options).refused()
                known = self._refused[entry.id] = (timeline, config, entry.config, refused)
            return known[3]
        except (HoodieError, OSError, ValueError) as e:
            # Cannot tell (e.g. a malformed plan): the runs go on, and each one's own shape check fails
            # with this error before writing anything, so it is reported (and retried) as a failed run.
            log.debug("shape of %s not computed: %s", entry.id, e, **tags(table=entry.id))
            return {}

    def _policies(self, entry: TableEntry, refused: dict[str, str] | None) -> None:
        """Submit the policy checks that are due; ``refused``: the tick's :meth:`refused` when it
        asked already (None: asked here, once, if a policy is due)."""
        now = self.clock.monotonic()
        for service, policy in entry.config.policies.items():
            key = (entry.id, service)
            if now < self._policy_due.get(key, 0.0) or not policy.enabled:
                continue
            if refused is None:
                refused = self.refused(entry)
            if service in refused or self.suspension(entry.id, service):
                continue
            self._policy_due[key] = now + policy.interval_s
            kind = RunKind.RUN if service in RUN_NOW else RunKind.SCHEDULE
            options = {**spec_of(service).policy_defaults, **policy.options}
            item = WorkItem(
                entry.id, service, kind, None, RunTrigger.POLICY, entry.config.priority - 1, options
            )
            # A policy check leaves a run in the history only when it plans (or fails).
            if self.queue.submit(item)[1]:
                log.debug(
                    "checking the %s policy of %s",
                    service,
                    entry.id,
                    **tags(table=entry.id, service=service),
                )

    @property
    def is_leader(self) -> bool:
        return self.leader is None or bool(self.leader.is_leader)

    def entry(self, table_id: str) -> TableEntry:
        entry = self.registry.get(table_id)
        if entry is None:
            raise NotFound(f"no table {table_id!r} (known: {', '.join(self.registry.ids()) or 'none'})")
        if entry.table is None and entry.error is None:  # not looked at yet: open it now
            with entry.guard:
                if self.registry.open(entry):
                    self._prepare(entry)
        return entry

    # -- state --------------------------------------------------------------------------------

    def readiness(self) -> list[str]:
        """Why the daemon is not ready (empty when ready)."""
        reasons: list[str] = []
        if not self.started:
            reasons.append("starting")
        if self.stopping:
            reasons.append("stopping")
        if self.last_tick is None:
            reasons.append("no watch tick has finished yet")
        if not self.store.writable():
            reasons.append(f"run history {self.store.path} is not writable")
        for entry in self.registry:
            if entry.lock is not None and entry.lock.state is not LockState.CONNECTED:
                reasons.append(f"lock of table {entry.id} is {entry.lock.state.value}")
        for root, error in self.registry.discovery_errors.items():
            reasons.append(f"discovery of {root} failed: {error}")
        if self.events is not None and self.events.error is not None:
            reasons.append(f"event notifications from {self.events.queue_url} fail: {self.events.error}")
        return reasons

    def liveness(self) -> str | None:
        """Why the daemon is not live (None when it is): the watch tick must keep finishing."""
        if not self.started or self.stopping:
            return None
        limit = max(3 * self.settings.watch.poll_interval_s, 30.0)
        if self.last_tick is None:
            return None
        age = self.clock.time() - self.last_tick
        return None if age <= limit else f"last watch tick finished {age:.0f} s ago (limit {limit:.0f} s)"

    def health_of(self, entry: TableEntry) -> Health:
        """The table's health score and its reasons (``service.health``)."""
        streaks = [s for (table, _), s in self.streaks.items() if table == entry.id]
        gave_up = {k[1]: v for k, v in self.gave_up.items() if k[0] == entry.id}
        return self.health_book.health(entry, streaks, gave_up)

    def suspended_services(self, table_id: str) -> dict[str, dict[str, Any]]:
        """Service -> its suspension on the table (since, failures, last error and run)."""
        return {
            service: streak.as_json()
            for (table, service), streak in sorted(self.streaks.items())
            if table == table_id and streak.suspended
        }

    def state_snapshot(self) -> dict[str, Any]:
        pending: dict[tuple[str, str], tuple[int, float, int]] = {}
        tables: dict[str, dict[str, Any]] = {}
        requests: dict[str, dict[str, int]] = {DISCOVERY: self.discovery_requests.snapshot()}
        if self.events is not None:
            requests[EVENTS] = self.events.requests.snapshot()
        health: dict[str, int] = {}
        for entry in self.registry:
            health[entry.health] = health.get(entry.health, 0) + 1
            tables[entry.id] = {
                "up": entry.healthy,
                "paused": entry.paused,
                "lock_state": entry.lock.state.value if entry.lock is not None else None,
            }
            requests[entry.id] = entry.requests.snapshot()
            watch = entry.watch
            for p in watch.pending if watch is not None else ():
                count, age, dead = pending.get((entry.id, p.service), (0, 0.0, 0))
                pending[(entry.id, p.service)] = (count + 1, max(age, p.age_s), dead + int(p.abandoned))
        tasks: dict[tuple[str, str], tuple[int, int]] = {}
        for item in self.queue.items():
            if item.running and item.progress[1]:
                done, total = tasks.get((item.table_id, item.service), (0, 0))
                tasks[(item.table_id, item.service)] = (done + item.progress[0], total + item.progress[1])
        scores = {}
        for entry in self.registry:
            h = self.health_of(entry)
            scores[entry.id] = (h.score, h.penalties())
        self.health_book.forget(scores)
        streaks = {key: (s.suspended, s.consecutive_failures) for key, s in self.streaks.items()}
        return {
            "health_scores": scores,
            "streaks": streaks,
            "pending": pending,
            "tables": tables,
            "requests": requests,
            "health": health,
            "queue": self.queue.counts(),
            "tasks": tasks,
            "ready": not self.readiness(),
            "paused": self.queue.paused,
            "leader": self.is_leader,
            "last_tick": self.last_tick or 0.0,
        }
