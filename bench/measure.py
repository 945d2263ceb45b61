"""Wall-clock timing (interleaved, best of N) and peak memory of one read in a fresh process.

Memory: ``python -m bench.measure <reader> <cache dir>`` imports everything, resets the
kernel's peak-RSS counter (``/proc/self/clear_refs``), records the baseline RSS, runs the read
once and prints JSON with the peak RSS (``VmHWM``) above that baseline, Arrow's default pool
``max_memory()`` and the Arrow size (``nbytes``) of the result. hudi-rs allocates through
Rust's allocator, so its Arrow-pool figure is near zero by construction; its RSS figure is the
comparable one. (``getrusage().ru_maxrss`` is not used: a child started by ``subprocess``
inherits the parent's peak through vfork+exec, which hides the child's own peak.) Where
``clear_refs`` is not writable the baseline is ``VmHWM`` after imports, which is the same
figure as long as imports are what set it.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.data import BenchData, load
from bench.readers import READERS


@dataclass(frozen=True)
class Timing:
    reader: str
    seconds: list[float]
    page_faults: list[int]  # minor faults of this process during each run (fresh memory touched)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        s = sorted(self.seconds)
        return s[len(s) // 2]


@dataclass(frozen=True)
class Memory:
    reader: str
    baseline_rss: int  # bytes, after imports
    peak_rss_delta: int  # bytes above the baseline while reading
    arrow_pool_max: int  # bytes, Arrow default pool high-water mark during the read
    arrow_pool_backend: str
    result_nbytes: int
    result_rows: int
    seconds: float  # the read's time in a fresh process (cold caches of the process)


def time_readers(
    data: BenchData,
    names: Sequence[str],
    repeat: int,
    readers: dict[str, Callable[[BenchData], pa.Table]] = READERS,
) -> dict[str, Timing]:
    """Run every reader ``repeat`` times, interleaved (round-robin), timing each run."""
    seconds: dict[str, list[float]] = {n: [] for n in names}
    faults: dict[str, list[int]] = {n: [] for n in names}
    for _ in range(repeat):
        for name in names:
            gc.collect()
            faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            result = readers[name](data)
            elapsed = time.perf_counter() - start
            faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before)
            del result
            seconds[name].append(elapsed)
    return {n: Timing(n, seconds[n], faults[n]) for n in names}


# -- memory: the child side ----------------------------------------------------------------------


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> bool:
    """Reset the kernel's peak RSS (VmHWM and ru_maxrss) to the current RSS, if allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def measure_here(reader: str, data: BenchData) -> Memory:
    """One read of ``reader`` in this process, with its peak memory above the current state."""
    gc.collect()
    pool = pa.default_memory_pool()
    pool.release_unused()
    reset_peak()
    baseline = status_kb("VmRSS")
    hwm_before = status_kb("VmHWM")
    pool_before = pool.bytes_allocated()
    # Arrow's pool exposes only a lifetime high-water mark; it is meaningful because the
    # child has allocated next to nothing from it before this read.
    start = time.perf_counter()
    result = READERS[reader](data)
    elapsed = time.perf_counter() - start
    hwm = status_kb("VmHWM")
    return Memory(
        reader=reader,
        baseline_rss=baseline * 1024,
        peak_rss_delta=(hwm - hwm_before) * 1024,
        arrow_pool_max=max(pool.max_memory() - pool_before, 0),
        arrow_pool_backend=pool.backend_name,
        result_nbytes=result.nbytes,
        result_rows=result.num_rows,
        seconds=elapsed,
    )


def measure_in_subprocess(reader: str, data: BenchData) -> Memory:
    """Run :func:`measure_here` in a fresh interpreter and return what it reports."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.measure", reader, str(data.root)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory child for {reader} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    raw: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return Memory(**raw)


def _child(argv: Sequence[str]) -> int:
    reader, root = argv
    data = load(Path(root))
    if data is None:
        print(f"no benchmark data at {root}", file=sys.stderr)
        return 2
    memory = measure_here(reader, data)
    print(json.dumps(memory.__dict__))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
