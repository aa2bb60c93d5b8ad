"""Support for the console's tests (no tests here): logging in with httpx, the data the pages
show, and Debian's Chromium for Playwright.

The data is what a running system leaves: users, devices and reminders made through the API
(``seed_world``), a planning pass for the next 24 hours (pending messages), and messages that
ended in the last hour, written as the consumer and the janitor write them (``ended``):
``success`` with their send instant and lateness, ``failed`` for a device's error or for the
project's credentials, ``is_missed``, ``cancelled``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo.database import Database

from shared.clock import utcnow
from shared.domain.messages import Status, new_message, terminal_update
from shared.domain.outcomes import ErrorCode, outcome_fields
from shared.settings import Settings
from shared.store import db as dbm
from tests.integration import test_api_support as api_support
from tests.integration.test_api_support import ApiServer, plan_window

CHROMIUM = Path("/usr/bin/chromium")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
Doc = dict[str, Any]


def chromium() -> str:
    """Debian's Chromium, which the browser tests drive; a failure (not a skip) without it."""
    if not CHROMIUM.exists():
        found = shutil.which("chromium")
        if found:
            return found
        pytest.fail(
            f"{CHROMIUM} is missing: the console's browser tests need Debian's Chromium. "
            "Install it: `make install` (or `apt-get install -y chromium`).",
            pytrace=False,
        )
    return str(CHROMIUM)


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, f"no csrf field in:\n{html[:2000]}"
    return found.group(1)


@contextlib.contextmanager
def login(server: ApiServer, key: str | None = None) -> Iterator[httpx.Client]:
    """An httpx client logged in to the console (with the ops key unless told otherwise)."""
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        form = client.get("/console/login")
        assert form.status_code == 200, form.text
        answer = client.post(
            "/console/login",
            data={"key": key or server.ops_key, "csrf": csrf_of(form.text), "next": "/console/"},
        )
        assert answer.status_code == 303, answer.text
        yield client


@contextlib.contextmanager
def start_console_api(base: Settings, **env: str) -> Iterator[ApiServer]:
    """``start_api`` with more environment for the process
    (``TZPUSH_API__CONSOLE_READ_ONLY="true"``)."""
    with api_support.start_api(base, env=env) as server:
        yield server


# -- data ------------------------------------------------------------------------------------
USERS = {
    "alice": ("Europe/Berlin", "phone-a", [("meal", "lunch", 90), ("medication", "Citramon", 200)]),
    "bob": ("America/New_York", "phone-b", [("mood", "check-in", 300), ("meal", "dinner", 500)]),
    "chen": ("Asia/Tashkent", "tablet-c", [("activity", "walk", 700), ("safety", "check", 900)]),
}


def token_of(uid: str) -> str:
    return f"ExponentPushToken[console-{uid}]"


def _local_hhmm(tz: str, minutes: int) -> str:
    from zoneinfo import ZoneInfo

    return (utcnow() + dt.timedelta(minutes=minutes)).astimezone(ZoneInfo(tz)).strftime("%H:%M")


def seed_world(server: ApiServer, db: Database[Doc]) -> None:
    """Users, devices and reminders through the API, then a planning pass (pending messages)."""
    with server.client("app") as app:
        for uid, (tz, device, reminders) in USERS.items():
            body = {"timezone": tz, "dailyCap": 20}
            if uid == "bob":
                body["quietHours"] = {"start": "23:00", "end": "06:30"}
            r = app.put(f"/v1/users/{uid}", json=body)
            assert r.status_code == 200, r.text
            r = app.put(f"/v1/users/{uid}/devices/{device}", json={"token": token_of(uid)})
            assert r.status_code == 200, r.text
            for category, label, minutes in reminders:
                r = app.put(
                    f"/v1/users/{uid}/reminders/{uid}-{label.lower()}",
                    json={
                        "category": category,
                        "label": label,
                        "at": _local_hhmm(tz, minutes),
                        "title": label.capitalize(),
                        "body": f"Time for {label}",
                    },
                )
                assert r.status_code in (200, 201), r.text
    plan_window(server, db)


def ended(
    db: Database[Doc],
    uid: str,
    label: str,
    due: dt.datetime,
    status: Status,
    *,
    late_ms: int = 0,
    code: ErrorCode | None = None,
    reason: str | None = None,
    suffix: str = "",
) -> str:
    """A message of ``uid``'s reminder ``label`` due at ``due`` that ended as ``status``."""
    user = db[dbm.USERS].find_one({"_id": uid})
    token = db[dbm.TOKENS].find_one({"userId": uid, "isActive": True})
    reminder = db[dbm.REMINDERS].find_one({"userId": uid, "label": label})
    assert user and token and reminder, (uid, label)
    local = due.date()
    doc = new_message(reminder, user, token, due, local, due - dt.timedelta(hours=20))
    doc["_id"] += f"~{status.value}{suffix}"  # never the id of a planned occurrence
    at = due + dt.timedelta(milliseconds=late_ms)
    if status is Status.SUCCESS:
        doc.update(
            outcome_fields(
                ok=True,
                at=at,
                due_ms=int(due.timestamp() * 1000),
                ticket=f"ticket-{doc['_id'][-12:]}",
                error=None,
                message=None,
                receipts_delay_s=900,
                code=None,
            ),
            attempts=1,
        )
        db[dbm.SENDS].insert_one({"_id": doc["_id"], "owner": "consumer-demo", "at": due})
    elif status is Status.FAILED:
        assert code is not None
        doc.update(
            outcome_fields(
                ok=False,
                at=at,
                due_ms=int(due.timestamp() * 1000),
                ticket=None,
                error=code.value,
                message=f"Expo said {code.value}",
                receipts_delay_s=900,
                code=code,
            ),
            attempts=1,
        )
    else:
        doc.update(terminal_update(status, reason or "ended", at))
    db[dbm.MESSAGES].insert_one(doc)
    return str(doc["_id"])


def seed_history(db: Database[Doc]) -> dict[str, str]:
    """Messages that ended in the last hour (and one missed two hours ago). Their ids by role."""
    now = utcnow().replace(microsecond=0)
    ids: dict[str, str] = {}
    for i in range(12):  # sent over the last hour, a little late each
        uid, label = [("alice", "lunch"), ("bob", "check-in"), ("chen", "walk")][i % 3]
        due = now - dt.timedelta(minutes=5 * i + 2)
        ids[f"sent{i}"] = ended(
            db, uid, label, due, Status.SUCCESS, late_ms=80 + 17 * i, suffix=f"-s{i}"
        )
    ids["missed"] = ended(
        db,
        "chen",
        "check",
        now - dt.timedelta(hours=2),
        Status.IS_MISSED,
        reason="7200 s late, grace 300 s",
    )
    ids["missed2"] = ended(
        db,
        "alice",
        "Citramon",
        now - dt.timedelta(minutes=90),
        Status.IS_MISSED,
        reason="5400 s late, grace 3600 s",
    )
    ids["failed_device"] = ended(
        db,
        "bob",
        "dinner",
        now - dt.timedelta(minutes=40),
        Status.FAILED,
        code=ErrorCode.DEVICE_NOT_REGISTERED,
    )
    ids["failed_project"] = ended(
        db,
        "alice",
        "lunch",
        now - dt.timedelta(minutes=30),
        Status.FAILED,
        code=ErrorCode.INVALID_CREDENTIALS,
        suffix="-f",
    )
    ids["cancelled"] = ended(
        db,
        "bob",
        "check-in",
        now - dt.timedelta(minutes=20),
        Status.CANCELLED,
        reason="quiet hours (23:00-06:30 local)",
        suffix="-c",
    )
    return ids
