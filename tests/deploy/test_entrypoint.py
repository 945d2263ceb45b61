"""The image's entrypoint, run outside a container, with what the Helm chart renders.

No container engine runs on these machines, so the image itself is not built here; these tests
run ``deploy/entrypoint.sh`` exactly as the chart's Deployment would (its args, its literal
environment, the rendered ``hts.yaml``) with ``--validate-config``, start a Spark executor the
way Spark-on-Kubernetes starts one from the same image, and check that the Dockerfile agrees with
the chart about paths, ports and the user.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import CI_VALUES, render, rendered_config

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
FIELD_VALUES = {
    "metadata.name": "hts-7d9c-abcde",
    "metadata.namespace": "tables",
    "status.podIP": "10.42.0.7",
    "spec.nodeName": "node-1",
    "spec.serviceAccountName": "hts",
}


def _daemon_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    container: dict[str, Any] = dep["spec"]["template"]["spec"]["containers"][0]
    return container


def _config_mount(container: dict[str, Any]) -> str:
    return next(m["mountPath"] for m in container["volumeMounts"] if m["mountPath"].startswith("/etc/hts"))


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    """The environment the pod would get: literal values, and downward-API fields filled in;
    values from Secrets are made up (they only need to exist)."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), item["value"]
            )
        elif "fieldRef" in item.get("valueFrom", {}):
            env[item["name"]] = FIELD_VALUES[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[item["name"]] = "from-a-secret-0123456789"
    return env


def _base_env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("HTS_", "SPARK_", "POD_"))}
    keep["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{keep.get('PATH', '')}"
    return keep


def _run(args: list[str], env: dict[str, str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ENTRYPOINT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: "defaults" if v is None else v.name)
def test_entrypoint_accepts_the_rendered_config(values: Path | None, tmp_path: Path) -> None:
    docs = render([values] if values else None)
    container = _daemon_container(docs)
    config_text = rendered_config(docs)
    args = list(container.get("args") or ["serve", "--config", f"{_config_mount(container)}/hts.yaml"])
    assert args[0] == "serve" and "--config" in args, args
    config = tmp_path / "hts.yaml"
    config.write_text(config_text)
    for token in (yaml.safe_load(config_text).get("api") or {}).get("tokens") or []:
        if "token_file" in token:
            assert not Path(token["token_file"]).is_absolute(), "token files are relative to hts.yaml"
            secret = tmp_path / token["token_file"]
            secret.parent.mkdir(parents=True, exist_ok=True)
            secret.write_text("t" * 32)
    args[args.index("--config") + 1] = str(config)
    env = {**_base_env(), **_container_env(container)}
    done = _run([*args, "--validate-config"], env)
    assert done.returncode == 0, done.stderr
    assert f"configuration is valid ({config})" in done.stderr


def test_a_broken_config_fails_through_the_entrypoint(tmp_path: Path) -> None:
    config = tmp_path / "hts.yaml"
    config.write_text("spark:\n  master: yarn\n")
    done = _run(["serve", "--config", str(config), "--validate-config"], _base_env())
    assert done.returncode == 2 and "spark.master='yarn'" in done.stderr


def test_executor_mode_starts_sparks_kubernetes_executor_backend() -> None:
    """The executor command line is right when the JVM starts Spark's executor backend with our
    arguments and it goes on to dial the driver (here a closed loopback port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **_base_env(),
        "SPARK_DRIVER_URL": f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-application-1",
        "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
        "SPARK_EXECUTOR_POD_NAME": "hts-exec-1",
        "SPARK_EXECUTOR_MEMORY": "256m",
        "SPARK_JAVA_OPT_1": "-Dhts.second=2",
        "SPARK_JAVA_OPT_0": "-Dhts.first=1",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    done = _run(["executor"], env)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "KubernetesExecutorBackend: Started daemon" in out, out[-2000:]
    assert f"Failed to connect to /127.0.0.1:{port}" in out, out[-2000:]


def test_executor_mode_names_what_is_missing() -> None:
    done = _run(["executor"], {**_base_env(), "SPARK_EXECUTOR_ID": "1"})
    assert done.returncode == 2
    assert "executor: SPARK_DRIVER_URL is not set" in done.stderr


def _dockerfile() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_dockerfile_agrees_with_the_chart_and_the_entrypoint() -> None:
    instructions = _dockerfile()
    final = instructions[max(i for i, (w, _) in enumerate(instructions) if w == "FROM") :]
    user = [rest for w, rest in final if w == "USER"]
    assert user and user[-1].split(":")[0] == "10001"
    copies = [rest.split() for w, rest in instructions if w == "COPY"]
    for parts in (c for c in copies if not any(p.startswith("--from=") for p in c)):
        for source in (p for p in parts[:-1] if not p.startswith("--")):
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    assert ["deploy/entrypoint.sh", "/usr/local/bin/hts-entrypoint"] in copies
    assert "/usr/local/bin/hts-entrypoint" in next(rest for w, rest in final if w == "ENTRYPOINT")
    env = " ".join(rest for w, rest in final if w == "ENV")
    base = next(rest for w, rest in instructions if w == "ARG" and rest.startswith("PYTHON_IMAGE="))
    python = re.search(r"python:(\d+\.\d+)", base)
    assert python is not None
    assert f"SPARK_HOME=/opt/hts/lib/python{python.group(1)}/site-packages/pyspark" in env
    exposed = {int(p) for w, rest in final if w == "EXPOSE" for p in rest.split()}
    k8s = [v for v in CI_VALUES if "spark-k8s" in v.name]
    container = _daemon_container(render(k8s[:1] or None))
    ports = {p["containerPort"] for p in container.get("ports", [])}
    assert ports <= exposed, f"the chart opens {sorted(ports)}, the image exposes {sorted(exposed)}"
    assert f'"{_config_mount(container)}/hts.yaml"' in next(rest for w, rest in final if w == "CMD")
