"""deploy/prometheus/alerts.yml: every rule's unit tests pass under ``promtool test rules``
(alerts_test.yml), every alert has a test in which it fires, and each rule's runbook names a
section of docs/operating.md that exists."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "alerts.yml"
TESTS = REPO / "deploy" / "prometheus" / "alerts_test.yml"
NO_PROMTOOL = "promtool (Debian's prometheus package, `make install`) is not installed"


def alerts() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


@pytest.mark.skipif(shutil.which("promtool") is None, reason=NO_PROMTOOL)
def test_every_alert_rule_passes_its_promtool_unit_tests() -> None:
    proc = subprocess.run(
        ["promtool", "test", "rules", str(TESTS)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_alert_has_a_test_in_which_it_fires() -> None:
    fired = {
        case["alertname"]
        for test in yaml.safe_load(TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {r["alert"] for r in alerts()} - fired == set()


def test_every_alerts_runbook_is_a_section_of_the_operating_guide() -> None:
    text = (REPO / "docs" / "operating.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.*)$", text, flags=re.M)
    }
    for rule in alerts():
        runbook = rule["annotations"]["runbook"]
        assert runbook == f"docs/operating.md#{rule['alert'].lower()}"
        assert runbook.split("#")[1] in anchors, f"no section {rule['alert']} in operating.md"
