"""The Helm chart's Deployment (probes, a non-root read-only pod, the config checksum, replicas that
roll without gaps, selectors, Spark on Kubernetes' RBAC, AWS credentials) and its monitoring
(monitors, the rules and dashboards of ``deploy/``, NOTES), rendered offline as in ``test_helm_chart.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from tests.deploy.chart import (
    CHART,
    CRD_GROUP,
    NAMESPACE,
    ROOT,
    VALUES_CASES,
    config_map,
    container_of,
    deployment_of,
    files_of,
    find,
    pod_spec_of,
    projected_items,
    quiet_helm,  # noqa: F401  (autouse: Helm's Go logging off in this module)
    render,
    render_templates,
    rendered_config,
    selector_matches,
    token_secret,
    values_id,
)

# -- the Deployment ----------------------------------------------------------------------------


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_probes_hit_livez_and_readyz_on_the_api_port(values: Path | None) -> None:
    container = container_of(render(files_of(values)))
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


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_pods_run_non_root_with_a_read_only_root(values: Path | None) -> None:
    docs = render(files_of(values))
    pod = pod_spec_of(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["enableServiceLinks"] is False
    sc = container_of(docs)["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container_of(docs)["volumeMounts"]}
    for writable in ("/tmp", "/var/lib/hts"):
        assert "emptyDir" in volumes[mounts[writable]]
    assert container_of(docs)["resources"]["requests"] and container_of(docs)["resources"]["limits"]
    template = config_map(docs)["data"].get("executor-pod-template.yaml")
    if template is not None:
        executor = yaml.safe_load(template)["spec"]
        assert executor["securityContext"]["runAsNonRoot"] is True
        assert executor["automountServiceAccountToken"] is False
        assert executor["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_config_checksum_follows_the_config() -> None:
    def checksum(overrides: dict[str, Any] | None = None) -> str:
        annotations = deployment_of(render(overrides=overrides))["spec"]["template"]["metadata"][
            "annotations"
        ]
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
    dep = deployment_of(docs)
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert not find(docs, "PodDisruptionBudget") and not find(docs, "Role")
    assert pod_spec_of(docs)["automountServiceAccountToken"] is False
    assert container_of(docs)["image"] == "hts:0.1.0"
    assert container_of(docs)["args"] == ["serve", "--config", "/etc/hts/hts.yaml"]
    tokens = token_secret(docs)
    assert tokens is not None and set(tokens) == {"read", "admin"}
    assert all(len(t) == 32 for t in tokens.values()) and tokens["read"] != tokens["admin"]


def test_explicit_tokens_are_used_as_given() -> None:
    docs = render([CHART / "ci" / "pvc-tables-values.yaml"])
    assert token_secret(docs) == {
        "read": "read-token-0123456789abcdef",
        "admin": "admin-token-0123456789abcdef",
    }


@pytest.mark.parametrize("values", VALUES_CASES, ids=values_id)
def test_selectors_match_the_daemon_pods(values: Path | None) -> None:
    docs = render(files_of(values))
    dep = deployment_of(docs)
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(dep["spec"]["selector"]["matchLabels"], pod_labels)
    (service,) = find(docs, "Service")
    assert selector_matches(service["spec"]["selector"], pod_labels)
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= {
        p["name"] for p in container_of(docs)["ports"]
    }
    for pdb in find(docs, "PodDisruptionBudget"):
        assert selector_matches(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    for policy in find(docs, "NetworkPolicy"):
        assert selector_matches(policy["spec"]["podSelector"]["matchLabels"], pod_labels)
        port_names = {p["name"] for p in container_of(docs)["ports"]}
        for rule in policy["spec"]["ingress"]:
            assert {p["port"] for p in rule["ports"]} <= port_names
    template = config_map(docs)["data"].get("executor-pod-template.yaml")
    if template is not None:
        executor_labels = {**yaml.safe_load(template)["metadata"]["labels"], "spark-role": "executor"}
        assert not selector_matches(dep["spec"]["selector"]["matchLabels"], executor_labels)
    sa = pod_spec_of(docs)["serviceAccountName"]
    for binding in find(docs, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    if len(find(docs, "ServiceAccount")):
        assert find(docs, "ServiceAccount", sa)


def test_two_replicas_with_zookeeper_roll_without_gaps() -> None:
    docs = render([CHART / "ci" / "zookeeper-2-replicas-values.yaml"])
    dep = deployment_of(docs)
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    (pdb,) = find(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    affinity = pod_spec_of(docs)["affinity"]["podAntiAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]


def test_spark_on_kubernetes_gets_rbac_and_its_executors_reach_the_driver() -> None:
    docs = render([CHART / "ci" / "spark-k8s-values.yaml"])
    assert pod_spec_of(docs)["automountServiceAccountToken"] is True
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
    assert selector_matches(peer["podSelector"]["matchLabels"], executor_labels)
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
        assert pod_spec_of(docs)["automountServiceAccountToken"] is False


def test_aws_credentials_come_from_the_secret_or_irsa() -> None:
    docs = render([CHART / "ci" / "s3-static-tables-values.yaml"])
    env = {e["name"]: e for e in container_of(docs)["env"]}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "hts-aws-credentials"
    assert env["AWS_SESSION_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    assert env["AWS_REGION"]["value"] == "us-east-1"
    docs = render([CHART / "ci" / "dynamodb-irsa-values.yaml"])
    env = {e["name"]: e for e in container_of(docs)["env"]}
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
    assert projected_items(docs)["tokens/read"] == ("secret", "hts-api-tokens", "grafana-read")
    assert projected_items(docs)["tokens/admin"] == ("secret", "hts-api-tokens", "ops-admin")
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
