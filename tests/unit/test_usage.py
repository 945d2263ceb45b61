"""Per-run cost counters (hoodie.io.usage) and how a run's attempts add up (service.cost)."""

from __future__ import annotations

import threading

from hoodie.io import usage
from service.cost import add_costs, run_cost


def test_storage_requests_count_in_the_scope_of_their_thread_only() -> None:
    usage.count("get", bytes_read=10, file_read="t/f1")  # no scope open: counted nowhere
    seen: dict[str, usage.Usage] = {}

    def other() -> None:
        with usage.measure() as mine:
            usage.count("put", bytes_written=7, file_written=True)
        seen["other"] = mine

    with usage.measure() as used:
        usage.count("get", bytes_read=100, file_read="t/f1")
        usage.count("list")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert (used.storage_requests, used.bytes_read, used.files_read, used.bytes_written) == (2, 100, 1, 0)
    assert used.requests_by_op == {"get": 1, "list": 1} and used.requests_counted and used.transfers_counted
    assert (seen["other"].storage_requests, seen["other"].bytes_written, seen["other"].files_written) == (
        1,
        7,
        1,
    )


def test_a_task_cost_travels_as_json_and_adds_to_the_driver_scope() -> None:
    with usage.measure() as task:
        usage.count("get", bytes_read=5, file_read="t/f1")
    shipped = usage.Usage.from_json(task.to_json())
    with usage.measure() as run:
        usage.add_to_current(shipped)
        usage.add_to_current(shipped)
    assert (run.storage_requests, run.bytes_read, run.requests_by_op) == (2, 10, {"get": 2})
    assert run.files_read == 1 and run.read_from == {"t/f1": 10}, "a file read by two tasks is one file"
    assert run.cpu_seconds >= 2 * task.cpu_seconds


def test_uncounted_storage_is_null_and_attempts_sum() -> None:
    with usage.measure() as quiet:
        sum(i * i for i in range(20_000))
    first = run_cost(quiet, {"bytes_written": 0})
    assert first["storage_requests"] is None and first["bytes_read"] is None and first["core_seconds"] > 0
    with usage.measure() as counted:
        usage.count("get", bytes_read=3, file_read="t/f1")
    second = run_cost(counted, {"bytes_written": 40, "files_written": 2})
    total = add_costs(first, second)
    assert (
        total["bytes_read"] == 3 and total["storage_requests"] == 1 and total["requests_by_op"] == {"get": 1}
    )
    assert (total["bytes_written"], total["files_written"]) == (40, 2)
    assert abs(total["core_seconds"] - (first["core_seconds"] + second["core_seconds"])) < 1e-5
    assert add_costs(None, second) == second


def test_requests_counted_without_transfers_leave_bytes_read_not_counted() -> None:
    with usage.measure() as used:
        usage.count("list")
        usage.count("read")
    cost = run_cost(used, {})
    assert cost["storage_requests"] == 2 and cost["requests_by_op"] == {"list": 1, "read": 1}
    assert cost["bytes_read"] is None and cost["files_read"] is None, "unknown, not zero"
