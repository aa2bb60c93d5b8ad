"""`tzpush demo` end to end, non-interactively, on the test stack (never the default ports).

The demo runs as a subprocess without a TTY (plain log lines), with its reminders at the first
whole minute at least 20 s ahead, and stops by itself once everything has ended. The test checks
that every seeded push reached the fake at its due instant, that the two changes of mind were
cancelled with their reasons, that the dead device was deactivated, and that the printed summary
matches the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

from shared.store import db as dbm
from tests.integration.conftest import REPO_ROOT

DEMO_DB = "tzpush_demo_test"


def test_demo_runs_headless_and_summary_matches_database(stack, mongo_client, tmp_path):
    s = stack.settings
    env = {
        **os.environ,
        "TZPUSH_MONGO__URI": s.mongo.uri.get_secret_value(),
        "TZPUSH_STOMP__PORT": str(s.stomp.port),
        "TZPUSH_LOCAL__STATE_DIR": s.local.state_dir,
        "TZPUSH_METRICS__PORT": "0",
    }
    summary_file = tmp_path / "summary.json"
    cmd = [
        sys.executable, "-m", "ops.cli", "demo", "--no-services", "--fake-port", "0",
        "--database", DEMO_DB, "--minutes", "1", "--min-lead", "20", "--until-done",
        "--duration", "150", "--summary-json", str(summary_file),
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=200
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = proc.stdout
        summary = json.loads(summary_file.read_text())
        database = mongo_client[DEMO_DB]
        msgs = list(database[dbm.MESSAGES].find())
    finally:
        mongo_client.drop_database(DEMO_DB)

    # The summary matches the database.
    assert summary["messages"] == dict(sorted(Counter(m["status"] for m in msgs).items()))
    assert "pending" not in summary["messages"]
    # Every seeded occurrence either reached the fake or ended with a reason.
    by_id = {m["_id"]: m for m in msgs}
    delivered = {d["id"] for d in summary["deliveries"]}
    assert len(msgs) >= 20 and len(delivered) >= 20
    assert delivered == {m["_id"] for m in msgs if m["status"] == "success"} | {
        m["_id"] for m in msgs if m.get("receipt", {}).get("error") == "DeviceNotRegistered"
    }
    zones = {by_id[i]["timezone"] for i in delivered}
    for zone in ("Asia/Tashkent", "Europe/Berlin", "America/New_York", "Australia/Sydney"):
        assert zone in zones
    assert {"Asia/Kathmandu", "Pacific/Chatham"} <= zones
    # ... at its due instant: never early, and well within a generous bound.
    for d in summary["deliveries"]:
        assert 0 <= d["lateness_ms"] < 5000, d
        due_ms = int(by_id[d["id"]]["scheduledAt"].timestamp() * 1000)
        assert d["received_at_ms"] - due_ms == d["lateness_ms"]
    # The changes of mind after planning, and the dead device.
    reasons = {e["user"]: e["reason"] for e in summary["ended"]}
    assert reasons["u03"].startswith("user turned off")
    assert reasons["u05"] == "reminder removed"
    assert reasons["u07"].startswith("receipt error DeviceNotRegistered")
    assert [t["user"] for t in summary["deactivated"]] == ["u07"]
    assert "delivered u00" in out and "lateness" in out
    assert "cancelled u05" in out and "token deactivated for u07" in out
    assert "summary: " in out
