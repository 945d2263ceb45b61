"""The daemon's settings: one typed object, built from defaults < YAML file < environment < flags.

Hudi settings keep Apache Hudi's own key names (``hoodie.write.lock.*``,
``hoodie.compact.inline.max.delta.commits``, ...) in ``options`` maps: ``defaults.options``
apply to every table, a table's ``options`` override them. Environment variables start with
``HTS_`` and use ``__`` between levels, e.g. ``HTS_API__PORT=9090`` or
``HTS_SPARK__MASTER=spark://host:7077``; values that are lists or maps are JSON there.

In the YAML file, ``${NAME}`` inside a string value is replaced by the environment variable
``NAME`` (``$${`` stands for a literal ``${``): on Kubernetes the pod's name and address reach the
Spark settings that way. A relative ``token_file`` is relative to the YAML file's directory.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hoodie.services import registry
from service.errors import ConfigError

SERVICES = registry.names(self_scheduled=True)
"""Services the daemon can self-schedule by policy (execution also covers rollback of abandoned work)."""
RUN_BY_DAEMON = registry.names(daemon_runs=True)
"""Services the daemon runs (by policy, trigger or watcher): each may have a ``limits.per_service``."""
ENV_PREFIX = "HTS_"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Token(_Model):
    """A bearer token: ``read`` may look, ``admin`` may also trigger, cancel and pause."""

    token: str | None = Field(default=None, min_length=16)
    token_file: Path | None = None
    scope: Literal["read", "admin"] = "read"
    name: str = "token"

    @model_validator(mode="after")
    def _one_source(self) -> Token:
        if (self.token is None) == (self.token_file is None):
            raise ValueError(f"token {self.name!r}: give exactly one of token and token_file")
        return self

    def secret(self) -> str:
        if self.token is not None:
            return self.token
        assert self.token_file is not None
        try:
            value = self.token_file.read_text().strip()
        except OSError as e:
            raise ConfigError(f"token {self.name!r}: cannot read token_file {self.token_file}: {e}") from e
        if len(value) < 16:
            raise ConfigError(f"token {self.name!r}: {self.token_file} holds fewer than 16 characters")
        return value


class ApiSettings(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    tokens: tuple[Token, ...] = ()
    metrics_require_token: bool = False


class Policy(_Model):
    """Self-scheduling of one service: off unless ``enabled``; ``options`` are Hudi keys."""

    enabled: bool = False
    interval_s: float = Field(default=60.0, gt=0)
    options: dict[str, str] = Field(default_factory=dict)


def _known_policies(policies: dict[str, Policy]) -> dict[str, Policy]:
    for name in policies:
        if name not in SERVICES:
            raise ValueError(f"policies: unknown service {name!r} (known: {', '.join(SERVICES)})")
    return policies


class Limits(_Model):
    max_concurrent: int = Field(default=1, ge=1)
    per_service: dict[str, int] = Field(default_factory=dict)

    @field_validator("per_service")
    @classmethod
    def _known(cls, v: dict[str, int]) -> dict[str, int]:
        for name, n in v.items():
            if name not in RUN_BY_DAEMON:
                raise ValueError(
                    f"limits.per_service: unknown service {name!r} (known: {', '.join(RUN_BY_DAEMON)})"
                )
            if n < 1:
                raise ValueError(f"limits.per_service.{name}={n} must be at least 1")
        return v


class TableDefaults(_Model):
    """What every table gets unless its own entry says otherwise."""

    options: dict[str, str] = Field(default_factory=dict)
    policies: dict[str, Policy] = Field(default_factory=dict)
    priority: int = 0
    max_concurrent: int = Field(default=1, ge=1)
    storage_options: dict[str, str] = Field(default_factory=dict)

    @field_validator("policies")
    @classmethod
    def _policy_names(cls, v: dict[str, Policy]) -> dict[str, Policy]:
        return _known_policies(v)


class TableSpec(_Model):
    """One statically configured table, with per-table overrides."""

    path: str
    id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    options: dict[str, str] = Field(default_factory=dict)
    policies: dict[str, Policy] = Field(default_factory=dict)
    priority: int | None = None
    max_concurrent: int | None = Field(default=None, ge=1)
    storage_options: dict[str, str] = Field(default_factory=dict)
    paused: bool = False

    @field_validator("policies")
    @classmethod
    def _policy_names(cls, v: dict[str, Policy]) -> dict[str, Policy]:
        return _known_policies(v)


class TablesSettings(_Model):
    static: tuple[TableSpec, ...] = ()
    discover: tuple[str, ...] = ("var/tables",)
    rescan_interval_s: float = Field(default=60.0, gt=0)
    retry_initial_s: float = Field(default=5.0, gt=0)
    retry_max_s: float = Field(default=300.0, gt=0)


class EventSettings(_Model):
    """S3 event notifications delivered to an SQS queue: a look at the table as soon as it changes.

    The bucket's notification configuration sends ``s3:ObjectCreated:*`` and ``s3:ObjectRemoved:*``
    (a ``.hoodie/`` prefix filter is enough) to ``sqs_queue_url``; the daemon long-polls the queue
    (one ReceiveMessage per ``wait_s`` when quiet, plus one DeleteMessageBatch per batch received)
    and looks at each table an event names at once. Tables are then polled only every
    ``safety_poll_s`` (a lost or misrouted notification is noticed within it).
    """

    sqs_queue_url: str | None = None
    region: str | None = None
    """The queue's region (default: the environment's, AWS_REGION / AWS_DEFAULT_REGION)."""
    endpoint_url: str | None = None
    """Another endpoint for SQS (an emulator, a VPC endpoint); default: AWS_ENDPOINT_URL or AWS's."""
    wait_s: int = Field(default=20, ge=1, le=20)
    """SQS long-poll wait (at most 20 s, SQS's limit)."""
    safety_poll_s: float = Field(default=300.0, gt=0)
    """The longest time between two looks at a table while events are on."""


class WatchSettings(_Model):
    poll_interval_s: float = Field(default=5.0, gt=0)
    """Between looks at an active table; also the watch tick's period."""
    max_poll_interval_s: float = Field(default=60.0, gt=0)
    """The back-off ceiling: an idle table is looked at at least this often (one listing per look)."""
    idle_after_s: float = Field(default=120.0, ge=0)
    """A table whose timeline has not changed for this long backs off (doubling its wait per look)."""
    tick_budget_s: float | None = Field(default=None, gt=0)
    """How long one watch tick may take before it counts as an overrun (default: the interval)."""
    threads: int = Field(default=32, ge=1)
    """Tables looked at concurrently within a tick (a look mostly waits on storage)."""
    events: EventSettings = EventSettings()

    @model_validator(mode="after")
    def _ceiling(self) -> WatchSettings:
        if self.max_poll_interval_s < self.poll_interval_s:
            raise ValueError(
                f"watch.max_poll_interval_s={self.max_poll_interval_s} is below "
                f"watch.poll_interval_s={self.poll_interval_s}"
            )
        if self.events.sqs_queue_url and self.events.safety_poll_s < self.poll_interval_s:
            raise ValueError(
                f"watch.events.safety_poll_s={self.events.safety_poll_s} is below "
                f"watch.poll_interval_s={self.poll_interval_s}"
            )
        return self


class RetrySettings(_Model):
    max_attempts: int = Field(default=4, ge=1)
    backoff_initial_s: float = Field(default=10.0, ge=0)
    backoff_max_s: float = Field(default=600.0, ge=0)
    suspend_after: int | None = Field(default=4, ge=1)
    """Consecutive failed runs of a (table, service), across instants, after which the service is
    suspended on that table until an operator resumes it (null: never suspend)."""


class SparkSettings(_Model):
    master: str = "local[*]"
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("master")
    @classmethod
    def _master(cls, v: str) -> str:
        if not re.match(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|k8s://.+|sc://.+|in-process)$", v):
            raise ValueError(
                f"spark.master={v!r}: use local[*], local[N], spark://host:port, k8s://https://host:port, "
                "sc://host:port or in-process"
            )
        return v


class TrueTimeSettings(_Model):
    max_expected_clock_skew_ms: int | None = Field(default=None, ge=0)
    """The wait (Hudi's ``hoodie.time.generator.max_expected_clock_skew_ms``); default 200 ms, 1 ms
    with the in-process lock (Hudi's own inference)."""


class HaSettings(_Model):
    replica_id: str | None = None
    leader_election: bool = False
    zookeeper_url: str | None = None
    election_path: str = "/hts/leader"


class LoggingSettings(_Model):
    format: Literal["json", "text"] = "json"
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class Settings(_Model):
    api: ApiSettings = ApiSettings()
    tables: TablesSettings = TablesSettings()
    defaults: TableDefaults = TableDefaults()
    watch: WatchSettings = WatchSettings()
    limits: Limits = Limits()
    retry: RetrySettings = RetrySettings()
    spark: SparkSettings = SparkSettings()
    truetime: TrueTimeSettings = TrueTimeSettings()
    ha: HaSettings = HaSettings()
    logging: LoggingSettings = LoggingSettings()
    state_dir: Path = Path("var/hts")
    shutdown_grace_s: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _loopback_without_tokens(self) -> Settings:
        if not self.api.tokens and not _is_loopback(self.api.host):
            raise ValueError(
                f"api.host={self.api.host!r} is not a loopback address and no api.tokens are configured: "
                "without tokens the API only listens on loopback (127.0.0.1 or ::1)"
            )
        if self.ha.leader_election and not (self.ha.zookeeper_url or _zk_url(self.defaults.options)):
            raise ValueError(
                "ha.leader_election needs ha.zookeeper_url "
                "(or hoodie.write.lock.zookeeper.url in defaults.options)"
            )
        ids = [t.id for t in self.tables.static if t.id]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"tables.static: duplicate ids {dupes}")
        return self

    def leader_zookeeper_url(self) -> str | None:
        return self.ha.zookeeper_url or _zk_url(self.defaults.options)

    def as_json(self, *, redact: bool = True) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if redact:
            for token in data["api"]["tokens"]:
                if token.get("token"):
                    token["token"] = "***"
            for scope in [data["defaults"], *data["tables"]["static"]]:
                scope["storage_options"] = {k: "***" for k in scope.get("storage_options", {})}
        return data


def _zk_url(options: Mapping[str, str]) -> str | None:
    return options.get("hoodie.write.lock.zookeeper.url")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: maps merged key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """``HTS_A__B=v`` → ``{"a": {"b": v}}``; JSON values (lists, maps, numbers) are decoded."""
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ("HTS_SHARED", "HTS_CRASH_AT", "HTS_SPARK_MASTER"):
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__") if p]
        if not path or path[0] not in Settings.model_fields:
            continue
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, (int, float)) and not isinstance(value, bool) and path[-1] in ("host", "master"):
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


_ENV_REF = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_env(value: Any, environ: Mapping[str, str], where: str) -> Any:
    """``${NAME}`` in every string of ``value`` replaced from ``environ``; ``$${NAME}`` kept literal."""
    if isinstance(value, dict):
        return {k: _expand_env(v, environ, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, environ, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def one(match: re.Match[str]) -> str:
        if match.group(1):
            return "${" + match.group(2) + "}"
        name = match.group(2)
        if name not in environ:
            raise ConfigError(f"{where}: environment variable {name} is not set (used as ${{{name}}})")
        return environ[name]

    return _ENV_REF.sub(one, value)


def _relative_token_files(data: dict[str, Any], config_dir: Path) -> None:
    api = data.get("api")
    tokens = api.get("tokens") if isinstance(api, dict) else None
    for token in tokens if isinstance(tokens, list) else ():
        file = token.get("token_file") if isinstance(token, dict) else None
        if isinstance(file, str) and not Path(file).is_absolute():
            token["token_file"] = str(config_dir / file)


def load_settings(
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Settings from the YAML ``config_file`` (if any), then ``HTS_*`` environment variables, then
    ``overrides`` (the command-line flags), each level overriding the one before."""
    data: dict[str, Any] = {}
    env = os.environ if environ is None else environ
    if config_file is not None:
        path = Path(config_file)
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as e:
            raise ConfigError(f"cannot read --config {path}: {e}") from e
        except yaml.YAMLError as e:
            raise ConfigError(f"--config {path} is not valid YAML: {e}") from e
        if not isinstance(loaded, dict):
            raise ConfigError(f"--config {path} must hold a mapping at the top, not {type(loaded).__name__}")
        data = _expand_env(loaded, env, "")
        _relative_token_files(data, path.parent.absolute())
    data = deep_merge(data, _env_overrides(env))
    data = deep_merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
            + (f" (got {err['input']!r})" if not isinstance(err.get("input"), dict) else "")
            for err in e.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from e
