"""Allocation-heavy sections: Python's cyclic garbage collector paused while they run.

Updating the metadata table builds hundreds of thousands of short-lived, acyclic objects (keys,
encoded datums, KeyValue bytes) in a process whose heap already holds a commit's worth of data.
Each of those allocations counts towards the collector's thresholds, and every full collection
walks the whole heap: measured on the metadata benchmark, about a third of the update's time.
Nothing these sections build is cyclic, so pausing the collector loses nothing; reference
counting still frees everything. Sections nest and may run on several threads: the collector
comes back when the last one ends, and only if it was on when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


class _Pauses:
    """How many sections are running, and whether the collector was on before the first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False


_PAUSES = _Pauses()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off."""
    state = _PAUSES
    with state.lock:
        if state.depth == 0:
            state.was_enabled = gc.isenabled()
            gc.disable()
        state.depth += 1
    try:
        yield
    finally:
        with state.lock:
            state.depth -= 1
            if state.depth == 0 and state.was_enabled:
                gc.enable()
