"""The chaos run's workload: a seeded plan of API requests, then played against the API.

`plan(seed, start, seconds, users)` is pure: users in many zones (with whole-hour, half-hour and
45-minute offsets, DST both ways), each with installs and reminders due at minute instants spread
over the run (so many fall due in the same second), and while they fall due: reminders changed,
paused, resumed and removed (two changes of one reminder at once, changes in the last second
before the due instant), zone, category and on/off changes, installs moving between users,
logouts, erasures, batches mixing these, and replays of ``is_missed``. Every reminder's ``data``
carries ``uid``, ``rid`` and ``rev`` (a number per content), which is how the checker ties a
push to the request whose rule it followed. `play` sends the plan on time from a pool of
threads and records every request with its answer and its start and end.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
import zoneinfo
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

ZONES = (
    "UTC",
    "Europe/Paris",
    "Europe/London",
    "America/New_York",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/St_Johns",
    "Pacific/Apia",
    "Asia/Tokyo",
    "Africa/Casablanca",
    "Pacific/Kiritimati",
)
CATEGORIES = ("meal", "mood", "medication")
OFFSETS = (0, 0, 0, 5, -10, 30, 90)
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
SETUP_S = 12.0  # users, installs and first reminders are created in the first seconds
Doc = dict[str, Any]


@dataclass
class Op:
    at: float  # seconds after the start
    method: str
    path: str
    body: Any = None
    key: str = "app"


@dataclass
class _User:
    uid: str
    tz: str
    enabled: bool = True
    categories: dict[str, bool] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # device id -> token
    reminders: dict[str, Doc] = field(default_factory=dict)
    erased: bool = False

    def body(self) -> Doc:
        return {"timezone": self.tz, "enabled": self.enabled, "categories": dict(self.categories)}


class _Planner:
    def __init__(self, seed: int, start: float, seconds: float) -> None:
        self.rng = random.Random(f"chaos-workload-{seed}")
        self.start, self.seconds = start, seconds
        self.users: list[_User] = []
        self.ops: list[Op] = []
        self.rev = 0

    def hex(self) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(10))

    def live(self) -> list[_User]:
        return [u for u in self.users if not u.erased]

    def content(self, u: _User, rid: str, earliest: float) -> Doc:
        """A rule due at a minute instant between ``earliest`` and the run's last 15 s."""
        lo = self.start + max(earliest, 45.0)
        hi = self.start + self.seconds - 15.0
        minutes = [m for m in range(int(lo // 60) + 1, int(hi // 60) + 1)]
        due = 60 * self.rng.choice(minutes) if minutes else hi + 3600
        offset = self.rng.choice(OFFSETS)
        wall = dt.datetime.fromtimestamp(due - 60 * offset, zoneinfo.ZoneInfo(u.tz))
        roll = self.rng.random()
        weekdays = None
        if roll < 0.2:
            weekdays = sorted({DAYS[wall.weekday()], self.rng.choice(DAYS)}, key=DAYS.index)
        elif roll < 0.27:
            weekdays = [d for d in DAYS if d != DAYS[wall.weekday()]][:3]
        self.rev += 1
        return {
            "category": self.rng.choice(CATEGORIES),
            "label": f"l{self.rev}",
            "at": wall.strftime("%H:%M"),
            "offsetMinutes": offset,
            "weekdays": weekdays,
            "title": f"for {u.uid}",
            "body": f"rev {self.rev}",
            "data": {"uid": u.uid, "rid": rid, "rev": self.rev},
        }

    def add(self, at: float, method: str, path: str, body: Any = None, key: str = "app") -> None:
        self.ops.append(Op(round(at, 3), method, path, body, key))

    def setup(self, n: int) -> None:
        for i in range(n):
            u = _User(f"u-{self.hex()}", self.rng.choice(ZONES))
            self.users.append(u)
            for _ in range(self.rng.choice((1, 1, 2))):
                u.devices[f"d-{self.hex()}"] = f"ExponentPushToken[chaos{self.hex()}]"
            for _ in range(self.rng.choice((1, 2, 3))):
                rid = f"r-{self.hex()}"
                u.reminders[rid] = self.content(u, rid, 0)
            at = SETUP_S * i / n
            if i % 3:
                items: list[Doc] = [{"op": "user", "userId": u.uid, "user": u.body()}]
                items += [
                    {"op": "device", "userId": u.uid, "deviceId": d, "device": {"token": t}}
                    for d, t in u.devices.items()
                ]
                items += [
                    {"op": "reminder", "userId": u.uid, "reminderId": r, "reminder": c}
                    for r, c in u.reminders.items()
                ]
                self.add(at, "POST", "/v1/batch", {"items": items})
                continue
            self.add(at, "PUT", f"/v1/users/{u.uid}", u.body())
            for d, t in u.devices.items():
                self.add(at + 0.3, "PUT", f"/v1/users/{u.uid}/devices/{d}", {"token": t})
            for r, c in u.reminders.items():
                self.add(at + 0.6, "PUT", f"/v1/users/{u.uid}/reminders/{r}", c)

    def step(self, at: float) -> None:
        live = self.live()
        if not live:
            return
        u = self.rng.choice(live)
        rids = sorted(u.reminders)
        base = f"/v1/users/{u.uid}"
        roll = self.rng.random()
        if roll < 0.36 and rids:
            self.reminder_change(u, self.rng.choice(rids), at)
        elif roll < 0.44 and rids:  # two changes of one reminder at once
            rid = self.rng.choice(rids)
            self.reminder_change(u, rid, at, kind="put")
            self.reminder_change(u, rid, at, kind=self.rng.choice(("put", "pause", "resume")))
        elif roll < 0.52 and rids:  # a change in the last second before a due instant
            rid = self.rng.choice(rids)
            due = self.due_of(u, u.reminders[rid])
            if due is not None and due - self.start > at + 2:
                self.reminder_change(u, rid, due - self.start - self.rng.uniform(0.05, 1.5))
        elif roll < 0.56:
            u.tz = self.rng.choice(ZONES)
            self.add(at, "PUT", base, u.body())
        elif roll < 0.66:
            cat = self.rng.choice(CATEGORIES)
            u.categories[cat] = not u.categories.get(cat, True)
            self.add(at, "PUT", base, u.body())
        elif roll < 0.69:
            u.enabled = not u.enabled
            self.add(at, "PUT", base, u.body())
        elif roll < 0.76:  # an install moves to another user
            others = [v for v in live if v is not u and v.devices]
            if others:
                other = self.rng.choice(others)
                d, t = self.rng.choice(sorted(other.devices.items()))
                device = d if self.rng.random() < 0.5 else f"d-{self.hex()}"
                del other.devices[d]
                u.devices[device] = t
                self.add(at, "PUT", f"{base}/devices/{device}", {"token": t})
        elif roll < 0.80 and u.devices:
            d = self.rng.choice(sorted(u.devices))
            del u.devices[d]
            self.add(at, "DELETE", f"{base}/devices/{d}")
        elif roll < 0.84:
            d, t = f"d-{self.hex()}", f"ExponentPushToken[chaos{self.hex()}]"
            u.devices[d] = t
            self.add(at, "PUT", f"{base}/devices/{d}", {"token": t})
        elif roll < 0.855:
            u.erased = True
            self.add(at, "DELETE", base)
        elif roll < 0.95 and rids and len(live) > 1:
            self.batch(u, at)
        elif roll < 0.98:
            self.add(at, "POST", "/v1/replays", {"status": "is_missed"}, key="ops")
        else:
            self.add(at, "GET", f"{base}/reminders")

    def due_of(self, u: _User, c: Doc) -> float | None:
        for day in range(-1, 2):
            local = dt.datetime.fromtimestamp(self.start, zoneinfo.ZoneInfo(u.tz)).date()
            wall = dt.datetime.combine(
                local + dt.timedelta(days=day),
                dt.time.fromisoformat(c["at"]),
                tzinfo=zoneinfo.ZoneInfo(u.tz),
            )
            t = wall.timestamp() + 60 * c["offsetMinutes"]
            if self.start <= t <= self.start + self.seconds:
                return t
        return None

    def reminder_change(self, u: _User, rid: str, at: float, kind: str | None = None) -> None:
        kind = kind or self.rng.choice(("put", "put", "pause", "resume", "patch", "delete"))
        path = f"/v1/users/{u.uid}/reminders/{rid}"
        if kind == "delete":
            u.reminders.pop(rid, None)
            self.add(at, "DELETE", path)
        elif kind in ("pause", "resume"):
            self.add(at, "PATCH", path, {"active": kind == "resume"})
        else:
            c = self.content(u, rid, at + 25)
            u.reminders[rid] = c
            if kind == "patch":
                body = {k: c[k] for k in ("category", "at", "offsetMinutes", "weekdays", "data")}
                self.add(at, "PATCH", path, body)
            else:
                self.add(at, "PUT", path, c)

    def batch(self, u: _User, at: float) -> None:
        """A zone change, an install handed over and a reminder changed, in one batch."""
        other = self.rng.choice([v for v in self.live() if v is not u])
        u.tz = self.rng.choice(ZONES)
        items: list[Doc] = [{"op": "user", "userId": u.uid, "user": u.body()}]
        if other.devices:
            d, t = self.rng.choice(sorted(other.devices.items()))
            del other.devices[d]
            u.devices[d] = t
            items.append({"op": "device", "userId": u.uid, "deviceId": d, "device": {"token": t}})
        rid = self.rng.choice(sorted(u.reminders))
        u.reminders[rid] = self.content(u, rid, at + 25)
        items.append(
            {"op": "reminder", "userId": u.uid, "reminderId": rid, "reminder": u.reminders[rid]}
        )
        self.add(at, "POST", "/v1/batch", {"items": items})


def plan(seed: int, start: float, seconds: float, users: int, ops_per_s: float) -> list[Op]:
    """The seeded requests of a run starting at ``start`` (epoch s) for ``seconds``."""
    p = _Planner(seed, start, seconds)
    p.setup(users)
    at = SETUP_S
    while True:
        at += p.rng.expovariate(ops_per_s)
        if at > seconds - 5:
            break
        p.step(at)
    return sorted(p.ops, key=lambda o: o.at)


class Recorder:
    """Sends requests and records each (method, path, body, status, answer, start, end)."""

    def __init__(self, url: str, keys: dict[str, str]) -> None:
        self.clients = {
            name: httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10.0
            )
            for name, key in keys.items()
        }
        self.records: list[Doc] = []
        self._lock = threading.Lock()

    def send(self, method: str, path: str, body: Any = None, key: str = "app") -> Doc:
        start = time.time()
        status, answer = None, None
        try:
            r = self.clients[key].request(method, path, json=body)
            status = r.status_code
            try:
                answer = r.json()
            except ValueError:
                answer = r.text[:500] or None
        except httpx.HTTPError as exc:
            answer = f"{type(exc).__name__}: {exc}"
        rec = {
            "method": method,
            "path": path,
            "body": body,
            "status": status,
            "answer": answer,
            "start": start,
            "end": time.time(),
        }
        with self._lock:
            self.records.append(rec)
        return rec

    def write(self, path: Any) -> None:
        with self._lock:
            records = sorted(self.records, key=lambda r: r["start"])
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in records))

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


def play(ops: list[Op], start: float, recorder: Recorder, workers: int = 16) -> None:
    """Send each request at its instant (``start + at``), from a pool of threads."""
    with ThreadPoolExecutor(workers, thread_name_prefix="workload") as pool:
        for op in ops:
            delay = start + op.at - time.time()
            if delay > 0:
                time.sleep(delay)
            pool.submit(recorder.send, op.method, op.path, op.body, op.key)
