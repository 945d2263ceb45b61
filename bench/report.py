"""Plain-text tables of the benchmark's timings, memory figures and targets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure import Memory, Timing


@dataclass(frozen=True)
class Target:
    name: str
    value: float
    limit: float
    unit: str

    @property
    def passed(self) -> bool:
        return self.value <= self.limit


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [
        "  "
        + "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    for row in rows:
        lines.append(
            "  "
            + "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(lines)


def format_timings(timings: dict[str, Timing]) -> str:
    floor = timings["floor"].best if "floor" in timings else None
    rows = []
    for name, t in timings.items():
        rows.append(
            [
                name,
                f"{t.best:.3f}s",
                f"{t.median:.3f}s",
                " ".join(f"{s:.2f}" for s in t.seconds),
                f"{t.best / floor:.2f}x" if floor else "-",
                f"{sorted(t.page_faults)[len(t.page_faults) // 2] / 1000:,.0f}k",
            ]
        )
    return _table(["reader", "best", "median", "runs (s)", "vs floor", "page faults/run"], rows)


def format_memory(memory: dict[str, Memory]) -> str:
    rows = []
    for name, m in memory.items():
        rows.append(
            [
                name,
                _mb(m.peak_rss_delta),
                _mb(m.arrow_pool_max),
                _mb(m.result_nbytes),
                f"{m.peak_rss_delta / m.result_nbytes:.2f}x",
                f"{m.seconds:.2f}s",
            ]
        )
    backend = next(iter(memory.values())).arrow_pool_backend
    table = _table(
        [
            "reader",
            "peak RSS +",
            f"Arrow pool max ({backend})",
            "result nbytes",
            "RSS+/nbytes",
            "cold read",
        ],
        rows,
    )
    return (
        table
        + "\n  (peak RSS + = VmHWM above the RSS after imports; hudi-rs allocates outside Arrow's pool,"
        + "\n   so its pool figure is ~0; 'cold read' is the read's time in that fresh process)"
    )


def format_targets(targets: Sequence[Target]) -> str:
    width = max(len(t.name) for t in targets)
    lines = []
    for t in targets:
        verdict = "PASS" if t.passed else "MISS"
        lines.append(
            f"  {t.name.ljust(width)}  {t.value:6.2f}{t.unit}  (target <= {t.limit:.1f}{t.unit})  {verdict}"
        )
    return "\n".join(lines)
