"""The observability artefacts: Grafana dashboards (``deploy/grafana``) and Prometheus alert rules
(``deploy/prometheus``) against what ``hts serve`` really exports.

promtool (Debian's ``prometheus`` package, which ``make install`` installs) checks and unit-tests
the rules; a missing promtool is a failure, not a skip. The key test starts a real daemon, lets it
compact a MERGE_ON_READ table, scrapes ``/metrics`` and checks that every metric name and label
the dashboards and rules use is exported.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from service.locks.base import LockState
from service.metrics import Metrics
from service.operations import TRIGGERABLE
from service.store import RunState
from tests.daemon.helpers import ServeProcess, mor_table, request_compaction, wait_for
from tests.tables import new_table

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "hts-rules.yaml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "hts-rules.test.yaml"
GRAFANA = REPO / "deploy" / "grafana"
DASHBOARDS = sorted(GRAFANA.glob("*.json"))
EXPECTED_DASHBOARDS = {"hts-fleet.json", "hts-table.json", "hts-locks-truetime.json", "hts-spark.json"}
DATASOURCE = "${datasource}"
RUNBOOK_PREFIX = "docs/deploy.md#"

TARGET_LABELS = {"job", "instance"}  # added by Prometheus to every scraped series
BUILTIN_METRICS = {"up"}  # Prometheus' own series about its targets
# Label values the daemon uses (a typo in a matcher would make a panel empty or an alert mute).
KNOWN_VALUES = {
    "outcome": {s.value for s in RunState},
    "service": set(TRIGGERABLE) | {"rollback"},
    "state": {s.value for s in LockState},
}
# Grafana's variables, replaced by something PromQL parses.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "6h",
    "$table": "orders",
    "$instance": "hts-0:8080",
}
# Metrics the daemon exports (their HELP and TYPE) without samples in this test's scrape.
NOT_OBSERVED_HERE = {
    "hts_lock_acquire_failure_total": "needs another process holding the table lock",
}

METRIC_NAME = re.compile(r"\bhts_[A-Za-z0-9_]+")
SELECTOR = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^{}]*)\}")
MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)")
LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ANNOTATION_LABEL = re.compile(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)")


# -- promtool -----------------------------------------------------------------------------------


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(tool).is_file():
        pytest.fail(
            "promtool is missing: `make install` installs it (Debian's prometheus package); "
            "the observability tests do not run without it"
        )
    return subprocess.run([tool, *args], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(RULES.relative_to(REPO)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    result = promtool("test", "rules", str(RULE_TESTS.relative_to(REPO)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


# -- the rule file and its tests ----------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    with path.open() as f:
        return yaml.safe_load(f)


def rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(RULES)["groups"] for rule in group["rules"]]


def alerts() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]


def test_every_alert_has_severity_summary_description_and_runbook() -> None:
    found = alerts()
    assert len(found) >= 9
    names = [a["alert"] for a in found]
    assert len(names) == len(set(names)), f"duplicate alert names: {names}"
    problems = []
    for alert in found:
        name = alert["alert"]
        if alert.get("labels", {}).get("severity") not in {"critical", "warning", "info"}:
            problems.append(f"{name}: severity label missing or unknown")
        annotations = alert.get("annotations", {})
        for key in ("summary", "description", "runbook"):
            if not str(annotations.get(key, "")).strip():
                problems.append(f"{name}: no {key} annotation")
        if not str(annotations.get("runbook", "")).startswith(RUNBOOK_PREFIX):
            problems.append(f"{name}: runbook does not point into {RUNBOOK_PREFIX}")
    assert not problems, "\n".join(problems)


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in load_yaml(RULE_TESTS)["tests"]:
        for check in case.get("alert_rule_test", []):
            exp = check.get("exp_alerts") or []
            if exp:
                assert all(e.get("exp_labels") and e.get("exp_annotations") for e in exp), (
                    f"{check['alertname']} at {check['eval_time']}: assert labels and annotations"
                )
                firing.add(check["alertname"])
            else:
                quiet.add(check["alertname"])
    names = {a["alert"] for a in alerts()}
    assert not names - firing, f"alerts without a case where they fire: {sorted(names - firing)}"
    assert not names - quiet, f"alerts without a case where they stay quiet: {sorted(names - quiet)}"
    assert not (firing | quiet) - names, f"tests of unknown alerts: {sorted((firing | quiet) - names)}"


# -- dashboards ---------------------------------------------------------------------------------


def load_dashboard(path: Path) -> dict[str, Any]:
    with path.open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows


def dashboard_exprs(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, expr, legend) of every query: panel targets and template variables."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            where = f"{dashboard['uid']} / {panel.get('title')} / {target.get('refId')}"
            yield where, target["expr"], target.get("legendFormat", "")
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            text = query.get("query") if isinstance(query, dict) else query
            yield f"{dashboard['uid']} / ${variable['name']}", str(text), ""


def datasource_refs(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from datasource_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from datasource_refs(item)


def test_dashboards_are_valid_and_use_the_datasource_variable() -> None:
    assert {p.name for p in DASHBOARDS} == EXPECTED_DASHBOARDS
    uids: dict[str, str] = {}
    problems = []
    for path in DASHBOARDS:
        d = load_dashboard(path)  # valid JSON, or this raises
        name = path.name
        if not d.get("uid") or not d.get("title"):
            problems.append(f"{name}: uid and title must be set")
        if d.get("uid") in uids:
            problems.append(f"{name}: uid {d.get('uid')} also used by {uids[d['uid']]}")
        uids[d.get("uid", "")] = name
        if d.get("schemaVersion") != 39:
            problems.append(f"{name}: schemaVersion {d.get('schemaVersion')}, expected 39")
        variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
        ds = variables.get("datasource", {})
        if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
            problems.append(f"{name}: no Prometheus datasource variable named datasource")
        table = variables.get("table")
        if table is not None and "label_values(hts_table_up, table)" not in json.dumps(table):
            problems.append(
                f"{name}: the table variable does not come from label_values(hts_table_up, table)"
            )
        if not list(panels(d)):
            problems.append(f"{name}: no panels")
        ids = [p.get("id") for p in panels(d)]
        if len(ids) != len(set(ids)):
            problems.append(f"{name}: duplicate panel ids")
        for panel in panels(d):
            title = panel.get("title")
            if panel.get("type") == "row":
                continue
            if (panel.get("datasource") or {}).get("uid") != DATASOURCE:
                problems.append(f"{name} / {title}: panel datasource is not {DATASOURCE}")
            if not panel.get("targets"):
                problems.append(f"{name} / {title}: no targets")
            for target in panel.get("targets", []):
                if (target.get("datasource") or {}).get("uid", DATASOURCE) != DATASOURCE:
                    problems.append(f"{name} / {title}: target datasource is not {DATASOURCE}")
                if not target.get("expr", "").strip():
                    problems.append(f"{name} / {title}: empty expr")
        for ref in datasource_refs(d):
            uid = ref.get("uid") if isinstance(ref, dict) else ref
            if uid not in (DATASOURCE, "-- Grafana --"):
                problems.append(f"{name}: hard-coded datasource {ref!r}")
    assert not problems, "\n".join(problems)


def test_dashboard_queries_parse_and_name_metrics(tmp_path: Path) -> None:
    """Every query names an hts metric, and promtool parses it (as a recording rule, with
    Grafana's variables replaced)."""
    recording = []
    problems = []
    for path in DASHBOARDS:
        for where, expr, _ in dashboard_exprs(load_dashboard(path)):
            if not METRIC_NAME.findall(expr):
                problems.append(f"{where}: no hts_* metric in {expr!r}")
            if expr.startswith("label_values("):
                continue
            recording.append({"record": f"dashboard:query:{len(recording)}", "expr": grafana_free(expr)})
    assert not problems, "\n".join(problems)
    rule_file = tmp_path / "dashboard-queries.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": recording}]}))
    result = promtool("check", "rules", str(rule_file))
    assert result.returncode == 0, result.stdout + result.stderr


def grafana_free(expr: str) -> str:
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    return expr


# -- what the dashboards and rules use ----------------------------------------------------------


def used_queries() -> list[tuple[str, str, set[str]]]:
    """(where, expr, labels its result must carry: legends and annotation templates)."""
    out: list[tuple[str, str, set[str]]] = []
    for path in DASHBOARDS:
        for where, expr, legend in dashboard_exprs(load_dashboard(path)):
            out.append((where, grafana_free(expr), set(LEGEND_LABEL.findall(legend))))
    for rule in rules():
        name = rule.get("alert") or rule.get("record")
        templated = set(ANNOTATION_LABEL.findall(json.dumps(rule.get("annotations", {}))))
        out.append((f"rule {name}", rule["expr"], templated))
    for case in load_yaml(RULE_TESTS)["tests"]:
        for series in case.get("input_series", []):
            out.append((f"test series {series['series']}", series["series"], set()))
    return out


def metric_names(expr: str) -> set[str]:
    names = set(METRIC_NAME.findall(expr))
    names |= {m for m in BUILTIN_METRICS if re.search(rf"(?<![\w:]){m}\b", expr)}
    return names


def scope_after(expr: str, end: int) -> str:
    """The parenthesised argument that follows position ``end`` (an aggregation's operand)."""
    start = expr.find("(", end)
    if start < 0:
        return expr
    depth = 0
    for i in range(start, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        if depth == 0:
            return expr[start : i + 1]
    return expr


def label_uses(expr: str) -> Iterator[tuple[set[str], str, str | None, str | None]]:
    """(metrics the label must be on, label, operator, value) for selectors and groupings."""
    for match in LABEL_VALUES.finditer(expr):
        yield {match.group(1)}, match.group(2), None, None
    for metric, matchers in SELECTOR.findall(expr):
        for label, op, value in MATCHER.findall(matchers):
            yield {metric}, label, op, value
    for match in GROUPING.finditer(expr):
        keyword, labels = match.groups()
        scope = scope_after(expr, match.end()) if keyword in ("by", "without") else expr
        for label in filter(None, (s.strip() for s in labels.split(","))):
            yield metric_names(scope) or metric_names(expr), label, None, None


def output_labels(expr: str, exported: dict[str, set[str]]) -> set[str]:
    """The labels an expression's result can carry (roughly: its outermost grouping)."""
    if expr.lstrip().startswith("absent("):
        return {label for _, label, op, _ in label_uses(expr) if op == "="}
    first_by = re.search(r"\bby\s*\(([^()]*)\)", expr)
    if first_by:
        return {s.strip() for s in first_by.group(1).split(",") if s.strip()}
    labels = set(TARGET_LABELS)
    for name in metric_names(expr):
        labels |= exported.get(name, set())
    return labels


# -- the running daemon -------------------------------------------------------------------------


def run_finished(daemon: ServeProcess, run_id: int) -> dict[str, Any] | None:
    run: dict[str, Any] = daemon.get(f"/v1/runs/{run_id}")
    return run if run["state"] not in ("queued", "running") else None


def scrape_a_working_daemon(root: Path) -> str:
    """Start ``hts serve`` on three tables, make it do a bit of everything, scrape it twice.

    ``orders``: MERGE_ON_READ with log files, compacted on request (scraped mid-compaction too,
    so the queue gauges have samples), then archival; ``clock``: its TrueTime high-water mark an
    hour ahead, so the time issued counts as clock-behind; ``broken``: fails to open;
    ``failing``: its requested compaction names a log file that is gone, so its run fails.
    """
    mor_table(root / "tables" / "orders")
    failing = root / "tables" / "failing"
    mor_table(failing)
    request_compaction(failing)
    next(p for p in sorted(failing.rglob("*.log.*")) if ".hoodie" not in p.parts).unlink()
    clock = root / "tables" / "clock"
    new_table(clock)
    mark = clock / ".hoodie" / ".aux" / "hts" / "truetime"
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(json.dumps({"last_ms": int(time.time() * 1000) + 3_600_000}))
    broken = root / "tables" / "broken" / ".hoodie"
    broken.mkdir(parents=True)
    (broken / "hoodie.properties").write_text("this is not a table config\n")

    slow_tasks = {"HTS_CRASH_AT": "compaction.task_after_write", "HTS_CRASH_ACTION": "pause:1"}
    daemon = ServeProcess(root, "obs", env=slow_tasks).start()
    try:
        run = daemon.request("POST", "/v1/tables/orders/compaction", {})
        wait_for(lambda: "crash point compaction.task_after_write" in daemon.log(), 120, "a task")
        during = daemon.get("/metrics")
        issued = daemon.request("POST", "/v1/tables/clock/truetime", {})
        assert issued["instant_time"], issued
        compacted = wait_for(lambda: run_finished(daemon, run["id"]), 180, "the compaction")
        assert compacted["state"] == "succeeded", compacted
        assert compacted["details"].get("log_files_compacted"), compacted
        archival = daemon.request("POST", "/v1/tables/orders/archival", {})
        archived = wait_for(lambda: run_finished(daemon, archival["id"]), 120, "the archival")
        assert archived["state"] == "succeeded", archived
        wait_for(
            lambda: 'hts_table_up{table="broken"} 0.0' in daemon.get("/metrics"),
            60,
            "the broken table to be looked at",
        )
        wait_for(
            lambda: (
                'hts_service_consecutive_failures{service="compaction",table="failing"} 1.0'
                in daemon.get("/metrics")
            ),
            120,
            "the failing table's run to fail",
        )
        after = daemon.get("/metrics")
    finally:
        daemon.stop()
    assert daemon.proc is not None and daemon.proc.returncode == 0, f"exit on SIGTERM:\n{daemon.log()}"
    return str(during) + "\n" + str(after)


def exported_metrics(text: str) -> tuple[dict[str, set[str]], set[str]]:
    """Exported series names with the labels seen on them, and the names that had samples."""
    labels: dict[str, set[str]] = {}
    sampled: set[str] = set()
    for family in text_string_to_metric_families(text):
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        for suffix in suffixes:  # a family without samples still exports its HELP and TYPE
            labels.setdefault(family.name + suffix, set())
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
            sampled.add(sample.name)
    return labels, sampled


def declared_labels() -> dict[str, set[str]]:
    """Label names service/metrics.py declares on its counters, gauges and histograms."""
    out: dict[str, set[str]] = {}
    for metric in vars(Metrics()).values():
        if not isinstance(metric, MetricWrapperBase):
            continue
        names = set(metric._labelnames)
        kind = metric._type
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(kind, [""])
        for suffix in suffixes:
            out[metric._name + suffix] = names | ({"le"} if suffix == "_bucket" else set())
    return out


def test_dashboards_and_rules_use_only_what_the_daemon_exports(tmp_path: Path) -> None:
    exported, sampled = exported_metrics(scrape_a_working_daemon(tmp_path))
    queries = used_queries()

    used: dict[str, set[str]] = {}
    for where, expr, _ in queries:
        for name in metric_names(expr):
            used.setdefault(name, set()).add(where)
    assert len(used) >= 25, sorted(used)
    missing = {
        name: sorted(wheres) for name, wheres in used.items() if name not in exported.keys() | BUILTIN_METRICS
    }
    assert not missing, "metrics used but not exported by hts serve:\n" + "\n".join(
        f"  {name}  (in {', '.join(wheres[:3])})" for name, wheres in sorted(missing.items())
    )
    unobserved = sorted(n for n in used if n not in sampled | BUILTIN_METRICS | NOT_OBSERVED_HERE.keys())
    assert not unobserved, f"exported but without samples in the daemon's scrape: {unobserved}"

    # Labels: as seen on samples; for the few without samples, as service/metrics.py declares them.
    declared = declared_labels()
    for name in NOT_OBSERVED_HERE:
        exported[name] = exported.get(name, set()) | declared.get(name, set())
    problems = []
    for where, expr, result_labels in queries:
        for metrics, label, op, value in label_uses(expr):
            if label in TARGET_LABELS or label == "__name__":
                continue
            hts = {m for m in metrics if m not in BUILTIN_METRICS}
            if hts and not any(label in exported.get(m, set()) for m in hts):
                problems.append(f"{where}: label {label!r} is on none of {sorted(hts)}")
            known = KNOWN_VALUES.get(label)
            if hts and known and op in ("=", "=~") and value and re.fullmatch(r"[\w|]+", value):
                unknown = set(value.split("|")) - known
                if unknown:
                    problems.append(f"{where}: {label} value(s) {sorted(unknown)} never exported")
        available = output_labels(expr, exported)
        for label in result_labels - available:
            problems.append(f"{where}: uses {{{{{label}}}}}/$labels.{label}, result has {sorted(available)}")
    assert not problems, "labels the daemon does not export:\n" + "\n".join(problems)
