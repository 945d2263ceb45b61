"""The storage-based lock's keys, lock file location and local behaviour (no servers)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hoodie.errors import TableServiceError
from hoodie.transaction.lock import LockError
from service.locks import PROVIDER_KEY, STORAGE, check_lock_options, make_lock
from service.locks.storage import StorageBasedLockProvider, StorageLockConfig, lock_file_uri
from service.locks.storage_files import LockData

P = "hoodie.write.lock.storage."


def test_hudis_defaults_and_the_older_renewal_key() -> None:
    config = StorageLockConfig.from_options(base_path="/data/trips", options={})
    assert (config.validity_s, config.renew_interval_s) == (300.0, 30.0)
    assert config.lock_file_uri == "file:///data/trips/.hoodie/.locks/table_lock.json"
    assert StorageLockConfig.timings({P + "heartbeat.poll.secs": "6"}) == (300, 6)
    both = {P + "renew.interval.secs": "5", P + "heartbeat.poll.secs": "6", P + "validity.timeout.secs": "60"}
    assert StorageLockConfig.timings(both) == (60, 5)  # the current key wins


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {P + "validity.timeout.secs": "9", P + "renew.interval.secs": "1"},
            "=9 must be at least 10 seconds",
        ),
        ({P + "validity.timeout.secs": "100"}, "=100 must be at least ten times .*renew.interval.secs=30"),
        ({P + "renew.interval.secs": "0"}, r"renew.interval.secs=0 must be at least 1 second"),
        ({P + "heartbeat.poll.secs": "0"}, r"heartbeat.poll.secs=0 must be at least 1 second"),
        ({P + "validity.timeout.secs": "5m"}, r"validity.timeout.secs='5m' is not a whole number"),
    ],
)
def test_bad_timings_name_the_key_and_value(options: dict[str, str], message: str) -> None:
    with pytest.raises(TableServiceError, match=message):
        StorageLockConfig.timings(options)
    with pytest.raises(LockError, match=message):
        check_lock_options({PROVIDER_KEY: STORAGE, **options}, "defaults.options")


def test_the_lock_file_follows_the_base_path() -> None:
    assert lock_file_uri("s3a://lake/db/trips/") == "s3://lake/db/trips/.hoodie/.locks/table_lock.json"
    assert lock_file_uri("file:///x/t") == "file:///x/t/.hoodie/.locks/table_lock.json"
    with pytest.raises(TableServiceError, match=r"base path is 'lake/trips': set hoodie.base.path"):
        lock_file_uri("lake/trips")
    with pytest.raises(TableServiceError, match=r"not supported on gs://"):
        lock_file_uri("gs://lake/trips")
    with pytest.raises(TableServiceError, match="needs a bucket and a path"):
        lock_file_uri("s3://lake")
    named = {"hoodie.base.path": "s3a://lake/trips/"}
    config = StorageLockConfig.from_options(base_path="lake/trips", options=named)
    assert config.lock_file_uri == "s3://lake/trips/.hoodie/.locks/table_lock.json"
    config = StorageLockConfig.from_options(base_path="lake/trips", options={}, base_uri="s3://lake/trips")
    assert config.lock_file_uri == "s3://lake/trips/.hoodie/.locks/table_lock.json"
    # a local table's URI as hts's FileIO gives it (``file:/x``)
    config = StorageLockConfig.from_options(base_path="/x/t", options={}, base_uri="file:/x/t")
    assert config.lock_file_uri == "file:///x/t/.hoodie/.locks/table_lock.json"
    with pytest.raises(
        TableServiceError, match=r"hoodie.base.path='s3://lake/other' is not the table at 'lake/t'"
    ):
        StorageLockConfig.from_options(base_path="lake/t", options={"hoodie.base.path": "s3://lake/other"})
    with pytest.raises(
        TableServiceError, match=r"hoodie.base.path='s3://lake/t2' is not the table .*base URI"
    ):
        StorageLockConfig.from_options(
            base_path="lake/t", options={"hoodie.base.path": "s3://lake/t2"}, base_uri="s3://lake/t"
        )


def test_make_lock_chooses_it_by_class_name_or_short_name(tmp_path: Path) -> None:
    check_lock_options({PROVIDER_KEY: STORAGE}, "defaults.options")
    for name in (STORAGE, "StorageBasedLockProvider"):
        lock = make_lock(
            table_id="t", base_path=str(tmp_path), table_name="t", options={PROVIDER_KEY: name}, client_id="c"
        )
        try:
            assert isinstance(lock.inner, StorageBasedLockProvider)
            lock.acquire(1)
            data = json.loads((tmp_path / ".hoodie/.locks/table_lock.json").read_text())
            assert data["owner"] == lock.inner.owner and data["expired"] is False
            assert 299_000 < data["validUntil"] - time.time() * 1000 <= 300_000
        finally:
            lock.close()
        assert json.loads((tmp_path / ".hoodie/.locks/table_lock.json").read_text())["expired"] is True


def _provider(path: Path) -> StorageBasedLockProvider:
    config = StorageLockConfig(lock_file_uri(str(path)), validity_s=2.0, renew_interval_s=0.1)
    return StorageBasedLockProvider(config, config.store())


def test_an_unreadable_lock_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    lock_file = tmp_path / ".hoodie/.locks/table_lock.json"
    lock_file.parent.mkdir(parents=True)
    for content in ('{"expired": false, "owner": "x"}', "not json", '{"expired": "no", "validUntil": 1}'):
        lock_file.write_text(content)
        p = _provider(tmp_path)
        try:
            with pytest.raises(LockError, match="table_lock.json"):
                p.acquire(1)
        finally:
            p.close()
        assert lock_file.read_text() == content
    lock_file.write_text('{"expired": true, "validUntil": 1, "owner": "x", "extra": [1]}')  # unknown: ignored
    p = _provider(tmp_path)
    try:
        p.acquire(1)
        assert p.is_held()
    finally:
        p.close()


def test_two_providers_and_two_threads_exclude_each_other_and_reenter(tmp_path: Path) -> None:
    a, b = _provider(tmp_path), _provider(tmp_path)
    try:
        a.acquire(1)
        a.acquire(1)  # re-entrant for this thread
        with pytest.raises(LockError, match=f"held by '{a.owner}'"):
            b.acquire(0.3)
        outcome: list[str] = []

        def other_thread() -> None:
            try:
                a.acquire(0.2)
                outcome.append("acquired")
            except LockError as e:
                outcome.append(str(e))

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert "another thread of this process" in outcome[0]
        a.release()
        assert a.is_held()  # still once
        a.release()
        assert not a.is_held()
        b.acquire(1)
        assert b.is_held() and not a.is_held()
        b.release()
    finally:
        a.close()
        b.close()


def test_lock_data_is_hudis_json() -> None:
    data = LockData(expired=False, valid_until_ms=1_700_000_000_123, owner="u")
    assert json.loads(data.to_json()) == {"expired": False, "validUntil": 1_700_000_000_123, "owner": "u"}
    assert LockData.from_json(data.to_json(), "x") == data


def test_a_valid_lock_file_of_our_own_is_taken_back_at_once(tmp_path: Path) -> None:
    """An acquire whose answer was lost leaves a valid file naming us: no wait for its validity."""
    p = _provider(tmp_path)
    lock_file = tmp_path / ".hoodie/.locks/table_lock.json"
    lock_file.parent.mkdir(parents=True)
    mine = {"expired": False, "validUntil": int(time.time() * 1000) + 60_000, "owner": p.owner}
    lock_file.write_text(json.dumps(mine))
    other = _provider(tmp_path)
    try:
        with pytest.raises(LockError, match=f"held by '{p.owner}'"):
            other.acquire(0.2)
        p.acquire(0.5)
        assert p.is_held() and json.loads(lock_file.read_text())["validUntil"] < mine["validUntil"]
    finally:
        p.close()
        other.close()
