"""The plain Kubernetes manifests in ``deploy/k8s`` (for users without Helm).

Every object validates against Kubernetes 1.30 (``kubernetes_validate``, strict), the ConfigMap's
``hts.yaml`` is a valid daemon config (``service.settings.load_settings`` with the environment the
Deployment gives the pod), two replicas share a non-in-process lock, the selectors agree, and the
files are what the chart renders for ``ci/zookeeper-2-replicas-values.yaml`` with Spark on
Kubernetes (minus Helm's labels), so the two do not drift apart.
"""

from __future__ import annotations

import copy
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from service.locks import check_lock_options
from service.settings import load_settings
from tests.deploy.chart import CHART, find, render

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "k8s"
K8S_VERSION = "1.30.0"
POD_ENV = {"POD_NAME": "hts-6c9d8b7f5-q4k2m", "POD_IP": "10.42.0.9", "POD_NAMESPACE": "hts"}
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")
IN_PROCESS = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
CHART_EQUIVALENT = {
    "values": [CHART / "ci" / "zookeeper-2-replicas-values.yaml"],
    "overrides": {"spark": {"mode": "k8s"}, "persistence": {"tables": {"existingClaim": ""}}},
}


def _files() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


def _docs() -> list[dict]:
    return [d for p in _files() for d in yaml.safe_load_all(p.read_text()) if d]


def _one(docs: list[dict], kind: str) -> dict:
    (doc,) = find(docs, kind)
    return doc


def _config(docs: list[dict]) -> str:
    text: str = _one(docs, "ConfigMap")["data"]["hts.yaml"]
    return text


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    return _docs()


def test_every_object_is_valid_for_kubernetes_1_30(docs: list[dict]) -> None:
    assert {"Deployment", "Service", "ConfigMap", "Secret", "ServiceAccount", "Role", "RoleBinding"} <= {
        d["kind"] for d in docs
    }
    assert {"PodDisruptionBudget", "NetworkPolicy"} <= {d["kind"] for d in docs}
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "hts", doc["metadata"]["name"]
    template = yaml.safe_load(_one(docs, "ConfigMap")["data"]["executor-pod-template.yaml"])
    kubernetes_validate.validate(template, K8S_VERSION, strict=True)


def test_the_kustomization_lists_every_file() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["namespace"] == "hts"
    assert sorted(kustomization["resources"]) == [p.name for p in _files()]


def test_the_config_is_a_valid_daemon_config(docs: list[dict], tmp_path: Path) -> None:
    container = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    config_path = PurePosixPath(args[args.index("--config") + 1])
    local = tmp_path / config_path.relative_to("/")
    local.parent.mkdir(parents=True)
    local.write_text(_config(docs))
    settings = load_settings(local, environ=POD_ENV)
    check_lock_options(settings.defaults.options, "defaults.options")
    assert settings.defaults.options["hoodie.write.lock.provider"] != IN_PROCESS
    assert settings.ha.leader_election and settings.leader_zookeeper_url()
    assert settings.api.host == "0.0.0.0"
    assert settings.spark.conf["spark.driver.host"] == POD_ENV["POD_IP"]
    assert settings.spark.conf["spark.kubernetes.namespace"] == POD_ENV["POD_NAMESPACE"]
    assert settings.spark.conf["spark.kubernetes.driver.pod.name"] == POD_ENV["POD_NAME"]
    assert settings.spark.conf["spark.kubernetes.container.image"] == container["image"]
    assert settings.spark.master.startswith("k8s://")

    # Token files: relative to hts.yaml, where the projected volume puts the Secret's keys.
    secret = _one(docs, "Secret")
    (volume,) = [
        v for v in _one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"
    ]
    projected = {
        item["path"]: (kind, ref["name"], item["key"])
        for source in volume["projected"]["sources"]
        for kind, ref in source.items()
        for item in ref["items"]
    }
    for token in settings.api.tokens:
        assert token.token_file is not None
        relative = PurePosixPath(token.token_file.relative_to(local.parent))
        kind, name, key = projected[str(relative)]
        assert (kind, name) == ("secret", secret["metadata"]["name"])
        value = secret["stringData"][key]
        assert len(value) >= 16 and "REPLACE" in value
        (local.parent / relative).parent.mkdir(exist_ok=True)
        (local.parent / relative).write_text(value)
        assert token.secret() == value
    template_path = PurePosixPath(settings.spark.conf["spark.kubernetes.executor.podTemplateFile"])
    assert projected[str(template_path.relative_to(config_path.parent))][0] == "configMap"


def test_two_replicas_with_a_shared_lock(docs: list[dict]) -> None:
    dep = _one(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    options = yaml.safe_load(_config(docs))["defaults"]["options"]
    assert options["hoodie.write.lock.provider"].endswith("ZookeeperBasedLockProvider")
    assert _one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_selectors_match_the_daemon_pods(docs: list[dict]) -> None:
    dep = _one(docs, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    selector = dep["spec"]["selector"]["matchLabels"]
    assert _matches(selector, labels)
    service = _one(docs, "Service")
    assert _matches(service["spec"]["selector"], labels)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    port_names = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    assert _matches(_one(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels)
    policy = _one(docs, "NetworkPolicy")
    assert _matches(policy["spec"]["podSelector"]["matchLabels"], labels)
    for rule in policy["spec"]["ingress"]:
        assert {p["port"] for p in rule["ports"]} <= port_names
    template = yaml.safe_load(_one(docs, "ConfigMap")["data"]["executor-pod-template.yaml"])
    executor_labels = {**template["metadata"]["labels"], "spark-role": "executor"}
    assert not _matches(selector, executor_labels), "executor pods must not count as daemon pods"
    (driver_rule,) = [r for r in policy["spec"]["ingress"] if r.get("from")]
    assert _matches(driver_rule["from"][0]["podSelector"]["matchLabels"], executor_labels)
    binding = _one(docs, "RoleBinding")
    sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "hts"}]
    assert find(docs, "ServiceAccount", sa)


def _without_helm_labels(doc: dict) -> dict:
    """Helm's own labels and all annotations (checksums, resource policy) dropped."""
    doc = copy.deepcopy(doc)
    for meta in (doc["metadata"], doc.get("spec", {}).get("template", {}).get("metadata", {})):
        for key in HELM_ONLY_LABELS:
            meta.get("labels", {}).pop(key, None)
        meta.pop("annotations", None)
    return doc


def _comparable(doc: dict) -> dict[str, Any]:
    doc = _without_helm_labels(doc)
    if doc["kind"] == "ConfigMap":
        doc["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
        template = doc["data"].get("executor-pod-template.yaml")
        if template:
            _strip_executor_labels(template)
    if doc["kind"] == "Secret":
        doc.pop("data", None)
        doc.pop("stringData", None)
    return doc


def _strip_executor_labels(template: dict) -> None:
    for key in HELM_ONLY_LABELS:
        template["metadata"]["labels"].pop(key, None)


def test_the_manifests_are_what_the_chart_renders(docs: list[dict]) -> None:
    """Regenerate with the chart (kustomization.yaml says how) when this fails after a chart change."""
    chart = render(CHART_EQUIVALENT["values"], CHART_EQUIVALENT["overrides"])
    chart_objects = {(d["kind"], d["metadata"]["name"]): _comparable(d) for d in chart}
    ours = {(d["kind"], d["metadata"]["name"]): _comparable(d) for d in docs if d["kind"] != "Namespace"}
    assert sorted(ours) == sorted(chart_objects)
    for key, doc in ours.items():
        assert doc == chart_objects[key], f"{key[0]}/{key[1]} differs from the chart's"
