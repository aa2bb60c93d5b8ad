"""The recorded API history as changes of users, reminders and installs, each with its fate.

A record is one HTTP request: ``method``, ``path``, ``body``, ``status`` (None when no answer
came: a timeout or a cut connection), ``answer``, ``start`` and ``end`` (epoch seconds). A change
is ``ok`` (answered 2xx: it took effect somewhere in [start, end]), ``refused`` (4xx: no effect)
or ``unknown`` (no answer or 5xx: it may have taken effect at any time after its start).
A batch yields one change per item, judged by its own result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Doc = dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One intended change of one thing (``kind``: user, erase, login, logout, reminder,
    patch, remove), with what it asked (``body``) and when and how it ended."""

    kind: str
    user: str
    key: str  # the reminder id, the device id, or the user id
    body: Doc
    start: float
    end: float
    outcome: str  # ok | refused | unknown
    request: int  # index of the record in the history

    @property
    def token(self) -> str | None:
        return self.body.get("token") if self.kind == "login" else None


@dataclass
class History:
    records: list[Doc]
    changes: list[Change] = field(default_factory=list)

    def of(self, *kinds: str, user: str | None = None, key: str | None = None) -> list[Change]:
        """The changes of these kinds (of ``user`` / ``key`` when given), oldest start first."""
        return [
            c
            for c in self.changes
            if c.kind in kinds
            and (user is None or c.user == user)
            and (key is None or c.key == key)
        ]


def outcome(status: int | None) -> str:
    if status is None or status >= 500:
        return "unknown"
    return "ok" if status < 400 else "refused"


def _item_change(item: Doc, status: int | None, rec: Doc, i: int) -> Change | None:
    op, uid = item.get("op"), str(item.get("userId"))
    kind, key, body = {
        "user": ("user", uid, item.get("user") or {}),
        "device": ("login", str(item.get("deviceId")), item.get("device") or {}),
        "reminder": ("reminder", str(item.get("reminderId")), item.get("reminder") or {}),
    }.get(str(op), (None, "", {}))
    if kind is None:
        return None
    return Change(kind, uid, key, body, rec["start"], rec["end"], outcome(status), i)


def changes_of(rec: Doc, i: int) -> list[Change]:
    """The changes one request asked for (none for a read or a replay)."""
    method, parts = rec["method"], rec["path"].split("?")[0].strip("/").split("/")
    status, body = rec.get("status"), rec.get("body") or {}
    if parts[:2] == ["v1", "batch"] and method == "POST":
        results = (rec.get("answer") or {}).get("results") if status == 200 else None
        out = []
        for n, item in enumerate(body.get("items", [])):
            item_status = results[n].get("status") if results else (status if status else None)
            if results is None and status is not None and status < 500:
                item_status = status
            ch = _item_change(item, item_status, rec, i)
            if ch:
                out.append(ch)
        return out
    if parts[:2] != ["v1", "users"] or len(parts) < 3 or method == "GET":
        return []
    uid, fate = parts[2], outcome(status)
    if len(parts) == 3:
        kind = "user" if method == "PUT" else "erase"
        return [Change(kind, uid, uid, body, rec["start"], rec["end"], fate, i)]
    if len(parts) == 5 and parts[3] == "devices":
        kind = "login" if method == "PUT" else "logout"
        return [Change(kind, uid, parts[4], body, rec["start"], rec["end"], fate, i)]
    if len(parts) == 5 and parts[3] == "reminders":
        kind = {"PUT": "reminder", "PATCH": "patch", "DELETE": "remove"}[method]
        return [Change(kind, uid, parts[4], body, rec["start"], rec["end"], fate, i)]
    if len(parts) == 4 and parts[3] == "reminders" and method == "POST":
        rid = str((rec.get("answer") or {}).get("id", f"?{i}"))
        return [Change("reminder", uid, rid, body, rec["start"], rec["end"], fate, i)]
    return []


def load(path: Path) -> History:
    """The history in ``path`` (JSON lines), with its changes."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return from_records(records)


def from_records(records: list[Doc]) -> History:
    h = History(records)
    for i, rec in enumerate(records):
        h.changes.extend(changes_of(rec, i))
    h.changes.sort(key=lambda c: (c.start, c.request))
    return h
