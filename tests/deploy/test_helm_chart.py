"""The Helm chart ``helm/hts``: lint, render, Kubernetes schemas, and the daemon config it writes.

Everything runs offline through Helm's Go SDK (``helm_python``): no helm binary, no cluster. Every
rendered object is validated with ``kubernetes_validate`` against Kubernetes 1.30 (strict: unknown
fields are errors) -- except the prometheus-operator kinds of ``monitoring.coreos.com``
(ServiceMonitor, PodMonitor, PrometheusRule), for which kubernetes-validate ships no schema: those
are checked structurally here (apiVersion, kind, the required spec fields, a selector that matches
the Service's or the pods' labels, an endpoint port the Service/pod declares, rule groups equal to
deploy/prometheus/hts-rules.yaml). The rendered ``hts.yaml`` is loaded with the daemon's own
``service.settings.load_settings`` with the environment the Deployment gives the pod.

Every values file in ``helm/hts/ci/`` is covered by the parametrized tests automatically.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from service.locks import check_lock_options
from service.settings import Settings, load_settings
from tests.deploy.chart import (
    CHART,
    CRD_GROUP,
    NAMESPACE,
    VALUES_CASES,
    config_map,
    container_of,
    deployment_of,
    files_of,
    find,
    projected_items,
    quiet_helm,  # noqa: F401  (autouse: Helm's Go logging off in this module)
    render,
    rendered_config,
    selector_matches,
    token_secret,
    values_id,
    values_of,
)

K8S_VERSION = "1.30.0"
POD_ENV = {"POD_NAME": "hts-5d8f7c9b6-x2x7q", "POD_IP": "10.42.1.17", "POD_NAMESPACE": NAMESPACE}
PROVIDERS = {
    "in-process": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
    "zookeeper": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
    "dynamodb": "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider",
}


def _chart_values(values: Path | None) -> dict[str, Any]:
    """The values a release would use: the chart's defaults merged with the file's."""
    with helm_python.Chart.load(CHART) as chart:
        return chart.merge_values(values_of(files_of(values)))


def _load(docs: list[dict], tmp_path: Path) -> tuple[Settings, Path]:
    """The rendered hts.yaml loaded by the daemon's loader, from a copy of the pod's config dir."""
    mount = next(m["mountPath"] for m in container_of(docs)["volumeMounts"] if m["name"] == "config")
    config_dir = tmp_path / mount.lstrip("/")
    config_dir.mkdir(parents=True)
    config = config_dir / "hts.yaml"
    config.write_text(rendered_config(docs))
    return load_settings(config, environ=POD_ENV), config_dir


# -- lint and Kubernetes schemas --------------------------------------------------------------


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_lint_is_clean(values: Path | None) -> None:
    """``helm lint --strict --kube-version v1.30.0``: nothing of severity warning (2) or error (3)."""
    report = helm_python.lint(CHART, values_of(files_of(values)), strict=True, kube_version="v1.30.0")
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert not serious, serious
    assert not report["errors"], report["errors"]


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_values_pass_the_schema(values: Path | None) -> None:
    with helm_python.Chart.load(CHART) as chart:
        chart.validate_schema(values_of(files_of(values)))


def _check_monitoring_crd(doc: dict, docs: list[dict]) -> None:
    """Structure of the prometheus-operator objects (no schema in kubernetes-validate)."""
    assert doc["apiVersion"] == f"{CRD_GROUP}/v1"
    assert doc["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule"), doc["kind"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    assert doc["metadata"]["namespace"] == NAMESPACE
    spec = doc["spec"]
    if doc["kind"] == "PrometheusRule":
        assert set(spec) == {"groups"}
        for group in spec["groups"]:
            assert group["name"] and group["rules"]
            for rule in group["rules"]:
                assert ("alert" in rule) != ("record" in rule) and rule["expr"]
        return
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    selector = spec["selector"]["matchLabels"]
    if doc["kind"] == "ServiceMonitor":
        (service,) = find(docs, "Service")
        assert selector_matches(selector, service["metadata"]["labels"]), "selects no Service"
        port_names = {p["name"] for p in service["spec"]["ports"]}
        endpoints = spec["endpoints"]
    else:
        pod_labels = deployment_of(docs)["spec"]["template"]["metadata"]["labels"]
        assert selector_matches(selector, pod_labels), "selects no daemon pod"
        port_names = {p["name"] for p in container_of(docs)["ports"]}
        endpoints = spec["podMetricsEndpoints"]
    assert endpoints
    for endpoint in endpoints:
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
        assert re.fullmatch(r"\d+[smh]", endpoint["interval"])
        auth = endpoint.get("authorization")
        if auth is not None:
            assert auth["type"] == "Bearer"
            assert set(auth["credentials"]) == {"name", "key"}


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_every_object_is_valid_for_kubernetes_1_30(values: Path | None) -> None:
    docs = render(files_of(values))
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "ConfigMap", "ServiceAccount"} <= kinds
    for doc in docs:
        if doc["apiVersion"].startswith(CRD_GROUP + "/"):
            _check_monitoring_crd(doc, docs)
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        assert doc["metadata"]["namespace"] == NAMESPACE
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names)), names
    template = config_map(docs)["data"].get("executor-pod-template.yaml")
    if template is not None:
        kubernetes_validate.validate(yaml.safe_load(template), K8S_VERSION, strict=True)


# -- the daemon's config -----------------------------------------------------------------------


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_rendered_config_is_what_the_values_ask(values: Path | None, tmp_path: Path) -> None:
    v = _chart_values(values)
    docs = render(files_of(values))
    settings, config_dir = _load(docs, tmp_path)
    container = container_of(docs)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    config_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "config")

    # The API listens on the pod IP, on the port the probes and the Service use.
    http = next(p for p in container["ports"] if p["name"] == "http")
    assert settings.api.port == http["containerPort"] == v["api"]["port"]
    assert settings.api.host not in ("127.0.0.1", "::1", "localhost")
    assert settings.api.metrics_require_token == v["api"]["metricsRequireToken"]

    # Tokens: read and admin, files relative to hts.yaml, exactly where the Secret's keys land.
    assert {(t.name, t.scope) for t in settings.api.tokens} == {("read", "read"), ("admin", "admin")}
    projected = projected_items(docs)
    existing = v["api"]["tokens"]["existingSecret"]
    secret_name = existing or "hts-tokens"
    keys = v["api"]["tokens"]["existingSecretKeys"] if existing else {"read": "read", "admin": "admin"}
    generated = token_secret(docs)
    assert (generated is None) == bool(existing)
    for token in settings.api.tokens:
        assert token.token_file is not None
        relative = PurePosixPath(token.token_file.relative_to(config_dir))
        assert projected[str(relative)] == ("secret", secret_name, keys[token.scope])
        if generated is not None:
            (config_dir / relative).parent.mkdir(exist_ok=True)
            (config_dir / relative).write_text(generated[keys[token.scope]])
            assert len(token.secret()) >= 16

    # Locks: Hudi's provider and keys; more than one replica never with the in-process lock.
    options = settings.defaults.options
    provider = options["hoodie.write.lock.provider"]
    assert provider == PROVIDERS[v["lock"]["provider"]]
    if v["replicaCount"] > 1:
        assert provider != PROVIDERS["in-process"]
    check_lock_options(options, "defaults.options")
    if v["lock"]["provider"] == "zookeeper":
        assert options["hoodie.write.lock.zookeeper.url"] == v["lock"]["zookeeper"]["url"]
        assert options["hoodie.write.lock.zookeeper.base_path"] == v["lock"]["zookeeper"]["basePath"]
    if v["lock"]["provider"] == "dynamodb":
        assert options["hoodie.write.lock.dynamodb.table"] == v["lock"]["dynamodb"]["table"]
    for user_key, user_value in v["config"]["defaults"].get("options", {}).items():
        assert options[user_key] == user_value
    assert settings.ha.leader_election == v["ha"]["leaderElection"]
    if settings.ha.leader_election:
        assert settings.leader_zookeeper_url()

    # Tables, policies and limits as given.
    assert list(settings.tables.discover) == v["config"]["tables"]["discover"]
    assert [t.path for t in settings.tables.static] == [t["path"] for t in v["config"]["tables"]["static"]]
    assert settings.limits.max_concurrent == v["config"]["limits"]["max_concurrent"]
    assert set(settings.defaults.policies) == set(v["config"]["defaults"].get("policies", {}))
    claim = v["persistence"]["tables"]
    for root in settings.tables.discover:
        if "://" not in root:
            assert claim["enabled"] and root.startswith(claim["mountPath"]), f"{root} is not mounted"
            assert claim["mountPath"] in mounts

    # Run history on the writable state volume; the pod's name as the replica id.
    assert str(settings.state_dir) in mounts
    env = {e["name"]: e for e in container["env"]}
    assert env["HTS_HA__REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"

    # Spark.
    master = settings.spark.master
    conf = settings.spark.conf
    mode = v["spark"]["mode"]
    assert master.startswith(
        {"local": "local[", "standalone": "spark://", "k8s": "k8s://", "connect": "sc://"}.get(
            mode, "in-process"
        )
    )
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    if mode in ("k8s", "standalone"):
        assert conf["spark.driver.host"] == POD_ENV["POD_IP"]
        assert int(conf["spark.driver.port"]) == ports["spark-driver"] == v["spark"]["driver"]["port"]
        assert int(conf["spark.blockManager.port"]) == ports["spark-blockmgr"]
    else:
        assert "spark.driver.host" not in conf and set(ports) == {"http"}
    if mode == "k8s":
        assert conf["spark.kubernetes.container.image"] == container["image"]
        assert conf["spark.kubernetes.namespace"] == POD_ENV["POD_NAMESPACE"]
        assert conf["spark.kubernetes.driver.pod.name"] == POD_ENV["POD_NAME"]
        assert conf["spark.executor.instances"] == str(v["spark"]["k8s"]["executor"]["instances"])
        template = PurePosixPath(conf["spark.kubernetes.executor.podTemplateFile"])
        assert projected[str(template.relative_to(config_mount))][0] == "configMap"
    for key, value in v["spark"]["conf"].items():
        assert conf[key] == str(value)


def test_the_pod_gets_the_environment_the_config_refers_to() -> None:
    docs = render([CHART / "ci" / "spark-k8s-values.yaml"])
    text = rendered_config(docs)
    referenced = set(re.findall(r"\$\{(\w+)\}", text))
    assert referenced == {"POD_NAME", "POD_IP", "POD_NAMESPACE"}
    fields = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in container_of(docs)["env"]
        if "fieldRef" in e.get("valueFrom", {})
    }
    assert fields["POD_NAME"] == "metadata.name"
    assert fields["POD_IP"] == "status.podIP"
    assert fields["POD_NAMESPACE"] == "metadata.namespace"


# -- refusals ----------------------------------------------------------------------------------


def test_two_replicas_with_the_in_process_lock_do_not_render() -> None:
    with pytest.raises(helm_python.HelmRenderError) as raised:
        render(overrides={"replicaCount": 2})
    message = str(raised.value)
    assert "replicaCount=2" in message and "lock.provider=in-process" in message
    assert "zookeeper" in message and "dynamodb" in message


def test_a_table_cannot_switch_to_the_in_process_lock_with_two_replicas() -> None:
    table = {
        "path": "s3://lake/t",
        "options": {"hoodie.write.lock.provider": PROVIDERS["in-process"]},
    }
    with pytest.raises(helm_python.HelmRenderError, match=r"config\.tables\.static\[0\]"):
        render(
            [CHART / "ci" / "zookeeper-2-replicas-values.yaml"], {"config": {"tables": {"static": [table]}}}
        )


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"lock": {"provider": "zookeeper"}}, "lock.zookeeper.url"),
        ({"lock": {"provider": "dynamodb"}}, "lock.dynamodb.table"),
        ({"ha": {"leaderElection": True}}, "ha.zookeeperUrl"),
        ({"api": {"host": "127.0.0.1"}}, "api.host=127.0.0.1"),
        ({"api": {"tokens": {"read": "r" * 20}}}, "both read and admin"),
        (
            {"config": {"defaults": {"options": {"hoodie.write.lock.provider": PROVIDERS["zookeeper"]}}}},
            "lock.provider",
        ),
    ],
    ids=["zk-url", "dynamodb-table", "leader-election", "loopback", "one-token", "provider-in-options"],
)
def test_values_that_cannot_work_do_not_render(overrides: dict[str, Any], names: str) -> None:
    with pytest.raises(helm_python.HelmError) as raised:
        render(overrides=overrides)
    assert names in str(raised.value)


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"replicaCount": "two"}, "/replicaCount"),
        ({"lock": {"provider": "etcd"}}, "/lock/provider"),
        ({"spark": {"mode": "yarn"}}, "/spark/mode"),
        ({"replicas": 2}, "'replicas' not allowed"),
        ({"config": {"spark": {"master": "local[2]"}}}, "'spark' not allowed"),
        ({"config": {"defaults": {"options": {"hoodie.cleaner.commits.retained": 10}}}}, "want string"),
        ({"config": {"defaults": {"policies": {"compact": {"enabled": True}}}}}, "/config/defaults/policies"),
        ({"api": {"tokens": {"read": "short", "admin": "short"}}}, "/api/tokens/read"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_the_schema_rejects_bad_values_naming_them(bad: dict[str, Any], where: str) -> None:
    with helm_python.Chart.load(CHART) as chart, pytest.raises(helm_python.HelmValuesError) as raised:
        chart.validate_schema(bad)
    assert where in str(raised.value)
    with pytest.raises(helm_python.HelmValuesError) as raised:
        render(overrides=bad)
    assert where in str(raised.value)


def test_the_schema_knows_only_the_daemons_settings() -> None:
    """Every key of ``config`` in values.schema.json is a field of the daemon's settings."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    models = Settings.model_fields
    for section, sub in config["properties"].items():
        assert section in models, section
        annotation = models[section].annotation
        if (
            sub.get("type") == "object"
            and isinstance(annotation, type)
            and hasattr(annotation, "model_fields")
        ):
            assert set(sub["properties"]) <= set(annotation.model_fields), section
    assert not {"api", "spark", "ha", "state_dir"} & set(config["properties"])
