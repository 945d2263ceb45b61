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
    CI_VALUES,
    NAMESPACE,
    ROOT,
    config_map,
    find,
    render,
    render_templates,
    rendered_config,
    token_secret,
    values_of,
)

K8S_VERSION = "1.30.0"
CRD_GROUP = "monitoring.coreos.com"
POD_ENV = {"POD_NAME": "hts-5d8f7c9b6-x2x7q", "POD_IP": "10.42.1.17", "POD_NAMESPACE": NAMESPACE}
PROVIDERS = {
    "in-process": "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
    "zookeeper": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
    "dynamodb": "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider",
}
CASES = [None, *CI_VALUES]


def _id(values: Path | None) -> str:
    return "defaults" if values is None else values.name


def _files(values: Path | None) -> list[Path] | None:
    return [values] if values is not None else None


@pytest.fixture(scope="module", autouse=True)
def _quiet_helm() -> None:
    helm_python.disable_logging()


def _chart_values(values: Path | None) -> dict[str, Any]:
    """The values a release would use: the chart's defaults merged with the file's."""
    with helm_python.Chart.load(CHART) as chart:
        return chart.merge_values(values_of(_files(values)))


def _deployment(docs: list[dict]) -> dict:
    (dep,) = find(docs, "Deployment")
    return dep


def _pod_spec(docs: list[dict]) -> dict:
    spec: dict = _deployment(docs)["spec"]["template"]["spec"]
    return spec


def _container(docs: list[dict]) -> dict:
    (container,) = _pod_spec(docs)["containers"]
    return container


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _load(docs: list[dict], tmp_path: Path) -> tuple[Settings, Path]:
    """The rendered hts.yaml loaded by the daemon's loader, from a copy of the pod's config dir."""
    mount = next(m["mountPath"] for m in _container(docs)["volumeMounts"] if m["name"] == "config")
    config_dir = tmp_path / mount.lstrip("/")
    config_dir.mkdir(parents=True)
    config = config_dir / "hts.yaml"
    config.write_text(rendered_config(docs))
    return load_settings(config, environ=POD_ENV), config_dir


def _projected(docs: list[dict]) -> dict[str, tuple[str, str, str]]:
    """Path in the config volume → (kind, object name, key) for every item it projects."""
    (volume,) = [v for v in _pod_spec(docs)["volumes"] if v["name"] == "config"]
    out = {}
    for source in volume["projected"]["sources"]:
        for kind, ref in source.items():
            for item in ref["items"]:
                out[item["path"]] = (kind, ref["name"], item["key"])
    return out


# -- lint and Kubernetes schemas --------------------------------------------------------------


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_lint_is_clean(values: Path | None) -> None:
    """``helm lint --strict --kube-version v1.30.0``: nothing of severity warning (2) or error (3)."""
    report = helm_python.lint(CHART, values_of(_files(values)), strict=True, kube_version="v1.30.0")
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert not serious, serious
    assert not report["errors"], report["errors"]


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_values_pass_the_schema(values: Path | None) -> None:
    with helm_python.Chart.load(CHART) as chart:
        chart.validate_schema(values_of(_files(values)))


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
        assert _matches(selector, service["metadata"]["labels"]), "selects no Service"
        port_names = {p["name"] for p in service["spec"]["ports"]}
        endpoints = spec["endpoints"]
    else:
        pod_labels = _deployment(docs)["spec"]["template"]["metadata"]["labels"]
        assert _matches(selector, pod_labels), "selects no daemon pod"
        port_names = {p["name"] for p in _container(docs)["ports"]}
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


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_every_object_is_valid_for_kubernetes_1_30(values: Path | None) -> None:
    docs = render(_files(values))
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


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_rendered_config_is_what_the_values_ask(values: Path | None, tmp_path: Path) -> None:
    v = _chart_values(values)
    docs = render(_files(values))
    settings, config_dir = _load(docs, tmp_path)
    container = _container(docs)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    config_mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "config")

    # The API listens on the pod IP, on the port the probes and the Service use.
    http = next(p for p in container["ports"] if p["name"] == "http")
    assert settings.api.port == http["containerPort"] == v["api"]["port"]
    assert settings.api.host not in ("127.0.0.1", "::1", "localhost")
    assert settings.api.metrics_require_token == v["api"]["metricsRequireToken"]

    # Tokens: read and admin, files relative to hts.yaml, exactly where the Secret's keys land.
    assert {(t.name, t.scope) for t in settings.api.tokens} == {("read", "read"), ("admin", "admin")}
    projected = _projected(docs)
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
        for e in _container(docs)["env"]
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


# -- the Deployment ----------------------------------------------------------------------------


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_probes_hit_livez_and_readyz_on_the_api_port(values: Path | None) -> None:
    container = _container(render(_files(values)))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (
        ("startupProbe", "/livez"),
        ("livenessProbe", "/livez"),
        ("readinessProbe", "/readyz"),
    ):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert get["port"] in (ports["http"], "http")
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 180, "startup probe too short for Spark"


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_pods_run_non_root_with_a_read_only_root(values: Path | None) -> None:
    docs = render(_files(values))
    pod = _pod_spec(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False
    sc = _container(docs)["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in _container(docs)["volumeMounts"]}
    for writable in ("/tmp", "/var/lib/hts"):
        assert "emptyDir" in volumes[mounts[writable]]
    assert _container(docs)["resources"]["requests"] and _container(docs)["resources"]["limits"]
    template = config_map(docs)["data"].get("executor-pod-template.yaml")
    if template is not None:
        executor = yaml.safe_load(template)["spec"]
        assert executor["securityContext"]["runAsNonRoot"] is True
        assert executor["automountServiceAccountToken"] is False
        assert executor["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_config_checksum_follows_the_config() -> None:
    def checksum(overrides: dict[str, Any] | None = None) -> str:
        annotations = _deployment(render(overrides=overrides))["spec"]["template"]["metadata"]["annotations"]
        value: str = annotations["checksum/config"]
        return value

    base = checksum()
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum() == base, "the checksum must not change from one render to the next"
    assert checksum({"resources": {"limits": {"memory": "8Gi"}}}) == base
    assert checksum({"config": {"watch": {"poll_interval_s": 7}}}) != base
    assert checksum({"spark": {"mode": "connect"}}) != base
    assert checksum({"lock": {"provider": "zookeeper", "zookeeper": {"url": "zk:2181"}}}) != base


def test_defaults_make_one_replica_that_never_overlaps_itself() -> None:
    docs = render()
    dep = _deployment(docs)
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert not find(docs, "PodDisruptionBudget") and not find(docs, "Role")
    assert _pod_spec(docs)["automountServiceAccountToken"] is False
    assert _container(docs)["image"] == "hts:0.1.0"
    assert _container(docs)["args"] == ["serve", "--config", "/etc/hts/hts.yaml"]
    tokens = token_secret(docs)
    assert tokens is not None and set(tokens) == {"read", "admin"}
    assert all(len(t) == 32 for t in tokens.values()) and tokens["read"] != tokens["admin"]


def test_explicit_tokens_are_used_as_given() -> None:
    docs = render([CHART / "ci" / "pvc-tables-values.yaml"])
    assert token_secret(docs) == {
        "read": "read-token-0123456789abcdef",
        "admin": "admin-token-0123456789abcdef",
    }


@pytest.mark.parametrize("values", CASES, ids=_id)
def test_selectors_match_the_daemon_pods(values: Path | None) -> None:
    docs = render(_files(values))
    dep = _deployment(docs)
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert _matches(dep["spec"]["selector"]["matchLabels"], pod_labels)
    (service,) = find(docs, "Service")
    assert _matches(service["spec"]["selector"], pod_labels)
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= {
        p["name"] for p in _container(docs)["ports"]
    }
    for pdb in find(docs, "PodDisruptionBudget"):
        assert _matches(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    for policy in find(docs, "NetworkPolicy"):
        assert _matches(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
        port_names = {p["name"] for p in _container(docs)["ports"]}
        for rule in policy["spec"]["ingress"]:
            assert {p["port"] for p in rule["ports"]} <= port_names
    template = config_map(docs)["data"].get("executor-pod-template.yaml")
    if template is not None:
        executor_labels = {**yaml.safe_load(template)["metadata"]["labels"], "spark-role": "executor"}
        assert not _matches(dep["spec"]["selector"]["matchLabels"], executor_labels)
    sa = _pod_spec(docs)["serviceAccountName"]
    for binding in find(docs, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    if len(find(docs, "ServiceAccount")):
        assert find(docs, "ServiceAccount", sa)


def test_two_replicas_with_zookeeper_roll_without_gaps() -> None:
    docs = render([CHART / "ci" / "zookeeper-2-replicas-values.yaml"])
    dep = _deployment(docs)
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    (pdb,) = find(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    affinity = _pod_spec(docs)["affinity"]["podAntiAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]


def test_spark_on_kubernetes_gets_rbac_and_its_executors_reach_the_driver() -> None:
    docs = render([CHART / "ci" / "spark-k8s-values.yaml"])
    assert _pod_spec(docs)["automountServiceAccountToken"] is True
    (role,) = find(docs, "Role")
    (rule,) = role["rules"]
    assert set(rule["resources"]) == {"pods", "services", "configmaps", "persistentvolumeclaims"}
    assert {"create", "delete", "watch", "list", "get"} <= set(rule["verbs"])
    (binding,) = find(docs, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    (policy,) = find(docs, "NetworkPolicy")
    driver_rules = [
        r for r in policy["spec"]["ingress"] if {"port": "spark-driver", "protocol": "TCP"} in r["ports"]
    ]
    (driver_rule,) = driver_rules
    executor_labels = {
        **yaml.safe_load(config_map(docs)["data"]["executor-pod-template.yaml"])["metadata"]["labels"],
        "spark-role": "executor",
    }
    (peer,) = driver_rule["from"]
    assert _matches(peer["podSelector"]["matchLabels"], executor_labels)
    assert peer["podSelector"]["matchLabels"]["spark-role"] == "executor"
    assert {"port": "spark-blockmgr", "protocol": "TCP"} in driver_rule["ports"]
    executor = yaml.safe_load(config_map(docs)["data"]["executor-pod-template.yaml"])["spec"]
    assert {
        v["persistentVolumeClaim"]["claimName"] for v in executor["volumes"] if "persistentVolumeClaim" in v
    } == {"hts-tables"}
    conf = yaml.safe_load(rendered_config(docs))["spark"]["conf"]
    assert conf["spark.kubernetes.container.image.pullSecrets"] == "registry-credentials"


def test_other_spark_modes_get_no_rbac() -> None:
    for name in ("spark-standalone-values.yaml", "spark-connect-values.yaml"):
        docs = render([CHART / "ci" / name])
        assert not find(docs, "Role") and not find(docs, "RoleBinding")
        assert _pod_spec(docs)["automountServiceAccountToken"] is False


def test_aws_credentials_come_from_the_secret_or_irsa() -> None:
    docs = render([CHART / "ci" / "s3-static-tables-values.yaml"])
    env = {e["name"]: e for e in _container(docs)["env"]}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "hts-aws-credentials"
    assert env["AWS_SESSION_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert env["AWS_REGION"]["value"] == "us-east-1"
    docs = render([CHART / "ci" / "dynamodb-irsa-values.yaml"])
    env = {e["name"]: e for e in _container(docs)["env"]}
    assert "AWS_ACCESS_KEY_ID" not in env
    (sa,) = find(docs, "ServiceAccount")
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


# -- monitoring --------------------------------------------------------------------------------


def test_monitors_send_the_read_token_when_metrics_need_one() -> None:
    docs = render([CHART / "ci" / "existing-secret-servicemonitor-values.yaml"])
    assert not find(docs, "Secret"), "an existing Secret is used, none is created"
    assert yaml.safe_load(rendered_config(docs))["api"]["metrics_require_token"] is True
    (sm,) = find(docs, "ServiceMonitor")
    (pm,) = find(docs, "PodMonitor")
    for endpoint in (*sm["spec"]["endpoints"], *pm["spec"]["podMetricsEndpoints"]):
        assert endpoint["authorization"]["credentials"] == {"name": "hts-api-tokens", "key": "grafana-read"}
    assert _projected(docs)["tokens/read"] == ("secret", "hts-api-tokens", "grafana-read")
    assert _projected(docs)["tokens/admin"] == ("secret", "hts-api-tokens", "ops-admin")
    without = render(overrides={"monitoring": {"serviceMonitor": {"enabled": True}}})
    (sm,) = find(without, "ServiceMonitor")
    assert "authorization" not in sm["spec"]["endpoints"][0]


def test_the_chart_links_the_rules_and_dashboards_of_deploy() -> None:
    """files/prometheus and files/grafana are symlinks to deploy/, so the chart ships what
    Prometheus and Grafana use outside Kubernetes; Helm follows them when it loads the chart."""
    for name in ("prometheus", "grafana"):
        link = CHART / "files" / name
        assert link.is_symlink()
        assert link.resolve() == (ROOT / "deploy" / name).resolve()
    with helm_python.Chart.load(CHART) as chart:
        shipped = {f["name"] for f in chart.files}
    assert "files/prometheus/hts-rules.yaml" in shipped


def test_prometheus_rule_and_dashboards_embed_the_files_of_deploy() -> None:
    rules_file = ROOT / "deploy" / "prometheus" / "hts-rules.yaml"
    dashboards = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
    if not rules_file.exists() or not dashboards:
        pytest.fail("deploy/prometheus/hts-rules.yaml or deploy/grafana/*.json is missing")
    docs = render([CHART / "ci" / "existing-secret-servicemonitor-values.yaml"])
    (rule,) = find(docs, "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(rules_file.read_text())["groups"]
    (cm,) = find(docs, "ConfigMap", "hts-dashboards")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert sorted(cm["data"]) == [p.name for p in dashboards]
    for path in dashboards:
        assert cm["data"][path.name] == path.read_text().rstrip("\n")
        json.loads(cm["data"][path.name])


def test_monitoring_is_off_by_default() -> None:
    docs = render()
    assert not [d for d in docs if d["apiVersion"].startswith(CRD_GROUP)]
    assert not find(docs, "ConfigMap", "hts-dashboards")


def test_notes_say_how_to_reach_the_api_and_metrics() -> None:
    notes = render_templates()["hts/templates/NOTES.txt"]
    assert "port-forward svc/hts 8080:8080" in notes
    assert "/metrics" in notes and "Authorization: Bearer" in notes
    assert "get secret hts-tokens" in notes
