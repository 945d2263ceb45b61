"""Settings: defaults < YAML file < HTS_* environment < flags; clear errors naming the value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from service.errors import ConfigError
from service.settings import load_settings
from tests.tables import hts

TOKEN = "a-long-enough-secret-token"


def test_embedded_defaults_are_what_make_run_promises() -> None:
    s = load_settings(environ={})
    assert s.tables.discover == ("var/tables",)
    assert s.spark.master == "local[*]"
    assert (s.api.host, s.api.port) == ("127.0.0.1", 8080)
    assert s.defaults.options == {}, "no lock configured: the in-process lock"
    assert all(not p.enabled for p in s.defaults.policies.values()), "self-scheduling is off by default"


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "hts.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "api": {"port": 9000},
                "spark": {"master": "spark://file:7077"},
                "watch": {"poll_interval_s": 7},
                "defaults": {"options": {"hoodie.compact.inline.max.delta.commits": "3"}},
                "tables": {"static": [{"path": "/data/t1", "id": "t1", "priority": 5}]},
            }
        )
    )
    env = {"HTS_API__PORT": "9100", "HTS_SPARK__MASTER": "sc://env:15002", "HTS_LIMITS__MAX_CONCURRENT": "3"}
    s = load_settings(config, {"api": {"port": 9200}}, environ=env)
    assert s.api.port == 9200, "flags win"
    assert s.spark.master == "sc://env:15002", "environment beats the file"
    assert s.limits.max_concurrent == 3
    assert s.watch.poll_interval_s == 7, "the file beats defaults"
    assert s.tables.static[0].priority == 5
    assert s.defaults.options["hoodie.compact.inline.max.delta.commits"] == "3"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"api": {"host": "0.0.0.0"}}, "api.host='0.0.0.0' is not a loopback address and no api.tokens"),
        ({"spark": {"master": "yarn"}}, "spark.master='yarn'"),
        ({"watch": {"poll_interval_s": 0}}, "watch.poll_interval_s"),
        ({"defaults": {"policies": {"vacuum": {"enabled": True}}}}, "unknown service 'vacuum'"),
        ({"limits": {"per_service": {"compaction": 0}}}, "limits.per_service.compaction=0"),
        ({"api": {"tokens": [{"token": "short"}]}}, "at least 16 characters"),
        (
            {"tables": {"static": [{"path": "/a", "id": "x"}, {"path": "/b", "id": "x"}]}},
            "duplicate ids ['x']",
        ),
        ({"bogus": 1}, "bogus: Extra inputs are not permitted"),
    ],
)
def test_invalid_settings_name_the_value(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="invalid settings") as e:
        load_settings(overrides=data, environ={})
    assert message in str(e.value)


def test_tokens_allow_other_addresses(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    s = load_settings(
        overrides={"api": {"host": "0.0.0.0", "tokens": [{"token_file": str(secret), "scope": "admin"}]}},
        environ={},
    )
    assert s.api.tokens[0].secret() == TOKEN
    assert "***" not in str(s.api.tokens[0].secret())
    assert s.as_json()["api"]["tokens"][0]["token_file"] == str(secret)


def test_cli_validate_and_print_config(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump({"api": {"port": 9300, "tokens": [{"token": TOKEN, "scope": "read"}]}}))
    printed = hts("serve", "--config", str(good), "--print-config", "--validate-config", "--port", "9400")
    assert printed.returncode == 0, printed.stderr
    shown = yaml.safe_load(printed.stdout)
    assert shown["api"]["port"] == 9400 and shown["api"]["tokens"][0]["token"] == "***"
    assert "configuration is valid" in printed.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("spark:\n  master: mesos://x\n")
    failed = hts("serve", "--config", str(bad), "--validate-config")
    assert failed.returncode == 2 and "spark.master='mesos://x'" in failed.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("api: [unclosed\n")
    assert "is not valid YAML" in hts("serve", "--config", str(broken), "--validate-config").stderr
    missing = hts("serve", "--config", str(tmp_path / "nope.yaml"), "--validate-config")
    assert missing.returncode == 2 and "cannot read --config" in missing.stderr


def test_config_file_takes_environment_references_and_relative_token_files(tmp_path: Path) -> None:
    (tmp_path / "tokens").mkdir()
    (tmp_path / "tokens" / "admin").write_text(TOKEN)
    config = tmp_path / "hts.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "api": {"host": "0.0.0.0", "tokens": [{"token_file": "tokens/admin", "scope": "admin"}]},
                "spark": {
                    "conf": {"spark.driver.host": "${POD_IP}", "literal": "$${POD_IP}", "two": "${A}-${B}"}
                },
            }
        )
    )
    s = load_settings(config, environ={"POD_IP": "10.1.2.3", "A": "a", "B": "b"})
    assert s.spark.conf == {"spark.driver.host": "10.1.2.3", "literal": "${POD_IP}", "two": "a-b"}
    assert s.api.tokens[0].token_file == tmp_path / "tokens" / "admin"
    assert s.api.tokens[0].secret() == TOKEN
    with pytest.raises(ConfigError) as e:
        load_settings(config, environ={"A": "a", "B": "b"})
    assert (
        str(e.value)
        == "spark.conf.spark.driver.host: environment variable POD_IP is not set (used as ${POD_IP})"
    )


def test_validate_config_checks_the_lock_settings_without_connecting(tmp_path: Path) -> None:
    zk = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
    config = tmp_path / "hts.yaml"
    options = {"hoodie.write.lock.provider": zk, "hoodie.write.lock.zookeeper.url": "zk-0.zk:2181"}
    config.write_text(yaml.safe_dump({"defaults": {"options": options}}))
    missing = hts("serve", "--config", str(config), "--validate-config")
    assert missing.returncode == 2 and "hoodie.write.lock.zookeeper.base_path is required" in missing.stderr
    options["hoodie.write.lock.zookeeper.base_path"] = "/hudi/locks"
    static = [{"path": "s3://b/t", "options": {"hoodie.write.lock.provider": "com.example.MyLock"}}]
    config.write_text(yaml.safe_dump({"defaults": {"options": options}, "tables": {"static": static}}))
    unknown = hts("serve", "--config", str(config), "--validate-config")
    assert unknown.returncode == 2
    assert (
        "tables.static[0] (s3://b/t): unsupported hoodie.write.lock.provider='com.example.MyLock'"
        in unknown.stderr
    )
    config.write_text(yaml.safe_dump({"defaults": {"options": options}}))
    assert hts("serve", "--config", str(config), "--validate-config").returncode == 0  # no ZooKeeper runs
