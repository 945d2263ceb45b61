"""Rendering the Helm chart ``helm/hts`` offline, for tests (``helm_python``: Helm's Go SDK, no binary).

    docs = render([CHART / "ci" / "spark-k8s-values.yaml"], {"replicaCount": 3})
    hts_yaml = rendered_config(docs)

Values files merge like ``helm -f a.yaml -f b.yaml`` (later files win, maps merge, lists are
replaced), then ``overrides`` like ``--set``. The release is ``hts`` in namespace ``hts``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from service.settings import deep_merge

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "hts"
CI_VALUES: list[Path] = sorted((CHART / "ci").glob("*.yaml"))
"""The chart's ci/ values files, each covering paths the defaults do not."""
RELEASE = "hts"
NAMESPACE = "hts"
CONFIG_KEY = "hts.yaml"


merge_values = deep_merge
"""``over`` on top of ``base`` the way Helm merges values files: maps deeply, the rest replaced."""


def values_of(
    values_files: list[Path] | None = None, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The user-supplied values: the files in order, then ``overrides``."""
    values: dict[str, Any] = {}
    for path in values_files or []:
        values = merge_values(values, yaml.safe_load(Path(path).read_text()) or {})
    return merge_values(values, overrides or {})


def render_templates(
    values_files: list[Path] | None = None, overrides: dict[str, Any] | None = None
) -> dict[str, str]:
    """Template path → rendered text (NOTES.txt included); raises ``helm_python.HelmError``."""
    with helm_python.Chart.load(CHART) as chart:
        return chart.render(
            values_of(values_files, overrides), name=RELEASE, namespace=NAMESPACE, is_install=True
        )


def render(values_files: list[Path] | None = None, overrides: dict[str, Any] | None = None) -> list[dict]:
    """Every Kubernetes object the chart renders, parsed (empty documents dropped)."""
    docs: list[dict] = []
    for name, text in sorted(render_templates(values_files, overrides).items()):
        if not name.endswith((".yaml", ".yml")):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def find(docs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    """The objects of ``kind`` (and ``name``, if given)."""
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def config_map(docs: list[dict]) -> dict:
    """The ConfigMap holding the daemon's ``hts.yaml``."""
    (cm,) = [d for d in find(docs, "ConfigMap") if CONFIG_KEY in (d.get("data") or {})]
    return cm


def rendered_config(docs: list[dict]) -> str:
    """The text of ``hts.yaml`` (the daemon's settings file) from the rendered ConfigMap."""
    text: str = config_map(docs)["data"][CONFIG_KEY]
    return text


def token_secret(docs: list[dict]) -> dict[str, str] | None:
    """The API tokens of the chart's Secret, decoded (None when an existing Secret is used)."""
    secrets = [d for d in find(docs, "Secret") if d["metadata"]["name"].endswith("-tokens")]
    if not secrets:
        return None
    return {k: base64.b64decode(v).decode() for k, v in secrets[0]["data"].items()}


# -- what the chart tests share (test_helm_chart.py, test_helm_deployment.py) -----------------------

CRD_GROUP = "monitoring.coreos.com"
VALUES_CASES = [None, *CI_VALUES]  # None: the chart's defaults alone


def values_id(values: Path | None) -> str:
    return "defaults" if values is None else values.name


def files_of(values: Path | None) -> list[Path] | None:
    return [values] if values is not None else None


# Autouse in each module that imports it (by name).
@pytest.fixture(scope="module", autouse=True)
def quiet_helm() -> None:
    helm_python.disable_logging()


def deployment_of(docs: list[dict]) -> dict:
    (dep,) = find(docs, "Deployment")
    return dep


def pod_spec_of(docs: list[dict]) -> dict:
    spec: dict = deployment_of(docs)["spec"]["template"]["spec"]
    return spec


def container_of(docs: list[dict]) -> dict:
    (container,) = pod_spec_of(docs)["containers"]
    return container


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def projected_items(docs: list[dict]) -> dict[str, tuple[str, str, str]]:
    """Path in the config volume → (kind, object name, key) for every item it projects."""
    (volume,) = [v for v in pod_spec_of(docs)["volumes"] if v["name"] == "config"]
    out = {}
    for source in volume["projected"]["sources"]:
        for kind, ref in source.items():
            for item in ref["items"]:
                out[item["path"]] = (kind, ref["name"], item["key"])
    return out
