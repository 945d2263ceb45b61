"""The deployment guide answers every alert: each rule's runbook link names a heading there."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


def test_every_alert_has_a_runbook_section_in_the_deployment_guide() -> None:
    anchors = _anchors((ROOT / "docs" / "deploy.md").read_text())
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "hts-rules.yaml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    for rule in alerts:
        link = rule["annotations"]["runbook"]
        path, _, anchor = link.partition("#")
        assert path == "docs/deploy.md", f"{rule['alert']}: runbook {link!r} is not in docs/deploy.md"
        assert anchor in anchors, f"{rule['alert']}: docs/deploy.md has no heading for #{anchor}"
        assert anchor == rule["alert"].lower()
