"""tzpush stats against a known data set: counts, reasons, lateness percentiles, tokens, pending."""

from __future__ import annotations

import datetime as dt
import json

from ops.stats import compute
from shared.clock import utcnow
from shared.store import db as dbm
from tests.integration.ops_helpers import run_cli


def _seed(db):
    dbm.ensure_indexes(db)
    now = utcnow().replace(minute=0, second=0, microsecond=0)
    docs = []

    def add(status, category, *, hours=-1.0, **kw):
        n = len(docs)
        docs.append(
            {
                "_id": f"m{n}",
                "userId": f"u{n}",
                "notificationTokenId": f"t{n}",
                "label": "x",
                "category": category,
                "status": status,
                "isDeleted": False,
                "scheduledAt": now + dt.timedelta(hours=hours),
                **kw,
            }
        )

    for lat in (100, 200, 300):
        add("success", "meal", lateness_ms=lat, reason="accepted by Expo")
    add("success", "mood", lateness_ms=1000, reason="accepted by Expo")
    add("success", "meal", hours=-48, lateness_ms=5000, reason="accepted by Expo")
    add("failed", "meal", reason="DeviceNotRegistered", lateness_ms=90)
    add("cancelled", "mood", reason="reminder removed")
    add("cancelled", "mood", reason="reminder removed")
    add("is_missed", "safety", reason="no consumer took it")
    add("pending", "meal", hours=2)
    add("pending", "meal", hours=2.5)
    add("pending", "mood", hours=3)
    db[dbm.MESSAGES].insert_many(docs)
    db[dbm.TOKENS].insert_many(
        [{"_id": f"t{i}", "userId": "u", "deviceId": f"d{i}", "isActive": i < 3} for i in range(4)]
    )
    return now


def test_stats_json_matches_the_known_data_set(world, capsys):
    now = _seed(world.db)
    assert run_cli(world.settings, "stats", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["messages"] == {
        "cancelled": 2,
        "failed": 1,
        "is_missed": 1,
        "pending": 3,
        "success": 5,
    }
    assert data["by_category"]["meal"] == {"failed": 1, "pending": 2, "success": 4}
    assert data["by_category"]["mood"] == {"cancelled": 2, "pending": 1, "success": 1}
    assert data["reasons"]["cancelled"] == [{"reason": "reminder removed", "count": 2}]
    assert data["reasons"]["failed"] == [{"reason": "DeviceNotRegistered", "count": 1}]
    assert data["lateness_ms"] == {"count": 5, "p50": 300, "p95": 5000, "max": 5000}
    assert data["tokens"] == {"active": 3, "inactive": 1}
    h2 = (now + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:00Z")
    h3 = (now + dt.timedelta(hours=3)).strftime("%Y-%m-%dT%H:00Z")
    assert data["pending_by_hour"] == {h2: 2, h3: 1}


def test_stats_since_excludes_older_messages_and_renders_tables(world, capsys):
    now = _seed(world.db)
    since = (now - dt.timedelta(hours=24)).isoformat()
    data = compute(world.db, now - dt.timedelta(hours=24))
    assert data["messages"]["success"] == 4
    assert data["lateness_ms"] == {"count": 4, "p50": 200, "p95": 1000, "max": 1000}
    assert run_cli(world.settings, "stats", "--since", since) == 0
    out = capsys.readouterr().out
    assert "lateness of sent messages (4): p50 200 ms, p95 1000 ms, max 1000 ms" in out
    assert "tokens: 3 active, 1 inactive" in out


def test_the_same_read_counts_pushes_per_minute_for_the_console(world):
    now = _seed(world.db)
    minute = now + dt.timedelta(minutes=7)
    world.db[dbm.MESSAGES].update_many(
        {"_id": {"$in": ["m0", "m1"]}}, {"$set": {"sentAt": minute + dt.timedelta(seconds=5)}}
    )
    world.db[dbm.MESSAGES].update_one(
        {"_id": "m2"}, {"$set": {"sentAt": now - dt.timedelta(hours=2)}}
    )
    data = compute(world.db, None, sent_since=now)
    assert data["sent_per_minute"] == {minute: 2}
    assert "sent_per_minute" not in compute(world.db, None)


def test_stats_with_nothing_sent_say_so(world, capsys):
    """Found by a README walk-through: `p50 None ms, p95 None ms, max None ms`."""
    assert run_cli(world.settings, "stats") == 0
    out = capsys.readouterr().out
    assert "lateness of sent messages: none sent yet" in out and "None" not in out
