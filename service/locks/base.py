"""What the daemon needs from a table lock beyond ``hoodie``'s protocol: connection health.

``hoodie.transaction.lock.LockProvider`` is acquire / release / is_held. The daemon's providers
(in-process, ZooKeeper, DynamoDB) also report the health of what backs them, so that the daemon
stops taking new work while a lock service is unreachable and aborts what relies on a lock that
is gone:

* ``CONNECTED``: locks can be taken and held locks are valid;
* ``SUSPENDED``: the connection is interrupted but held locks may still be valid (a ZooKeeper
  session not yet expired); no new work starts;
* ``LOST``: held locks are gone (session expired, lease taken over); work holding one aborts.

Every provider is shared by the daemon's threads for one table: it is thread-safe and
re-entrant for the thread that holds it, like Hudi's ``InProcessLockProvider``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from hoodie.services.options import int_option
from hoodie.transaction.lock import LockError, LockProvider

__all__ = ["LockConfig", "LockError", "LockState", "ServiceLock", "StateListener"]


class LockState(StrEnum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


StateListener = Callable[[LockState], None]


@runtime_checkable
class ServiceLock(LockProvider, Protocol):
    """A table lock with a health state."""

    @property
    def state(self) -> LockState: ...

    def add_state_listener(self, listener: StateListener) -> None:
        """Call ``listener`` (from any thread) whenever the state changes."""

    def close(self) -> None:
        """Release anything held and stop background threads; the provider is not used again."""


@dataclass(frozen=True)
class LockConfig:
    """Apache Hudi's generic ``hoodie.write.lock.*`` settings (``LockConfiguration``)."""

    wait_time_ms: int = 60_000
    num_retries: int = 15
    wait_time_ms_between_retry: int = 1_000
    max_wait_time_ms_between_retry: int = 16_000
    client_num_retries: int = 50
    client_wait_time_ms_between_retry: int = 5_000

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> LockConfig:
        p = "hoodie.write.lock."
        return cls(
            wait_time_ms=int_option(options, p + "wait_time_ms", cls.wait_time_ms, 1),
            num_retries=int_option(options, p + "num_retries", cls.num_retries, 0),
            wait_time_ms_between_retry=int_option(
                options, p + "wait_time_ms_between_retry", cls.wait_time_ms_between_retry, 0
            ),
            max_wait_time_ms_between_retry=int_option(
                options, p + "max_wait_time_ms_between_retry", cls.max_wait_time_ms_between_retry, 0
            ),
            client_num_retries=int_option(options, p + "client.num_retries", cls.client_num_retries, 0),
            client_wait_time_ms_between_retry=int_option(
                options, p + "client.wait_time_ms_between_retry", cls.client_wait_time_ms_between_retry, 0
            ),
        )
