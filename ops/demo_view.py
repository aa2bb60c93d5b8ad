"""What ``tzpush demo`` shows: a live terminal view, or plain log lines without a TTY.

Every ~0.5 s the demo takes a ``Snapshot`` (its own small database and the Expo fake's record of
received pushes) and either redraws a rich ``Live`` view (upcoming pushes with local time, zone
and UTC instant; deliveries with their lateness, measured from the fake's ``received_at_ms``
against ``scheduledAt``; cancellations and deactivations as they happen; counts by status) or
prints one line per new event. The same snapshot gives the final summary.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from pymongo.database import Database
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from devstack.fake_expo import FakeExpo
from ops.stats import percentile
from shared.domain.messages import ENDED_WITHOUT_SUCCESS, Doc, Status
from shared.store.mongo import reads


def _local(t: dt.datetime, zone: str) -> str:
    return t.astimezone(ZoneInfo(zone)).strftime("%H:%M")


def _utc(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%H:%M:%SZ")


@dataclass
class Snapshot:
    messages: list[Doc]
    tokens: list[Doc]
    pushes: list[Doc]
    at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(m["status"] for m in self.messages).items()))

    def deliveries(self) -> list[Doc]:
        by_id = {m["_id"]: m for m in self.messages}
        out = []
        for p in self.pushes:
            mid = (p.get("data") or {}).get("messageId")
            m = by_id.get(mid)
            if m is None:
                continue
            due_ms = int(m["scheduledAt"].timestamp() * 1000)
            out.append(
                {
                    "id": mid,
                    "user": m["userId"],
                    "zone": m["timezone"],
                    "category": m["category"],
                    "local": _local(m["scheduledAt"], m["timezone"]),
                    "scheduledAt": m["scheduledAt"].isoformat(),
                    "received_at_ms": p["received_at_ms"],
                    "lateness_ms": p["received_at_ms"] - due_ms,
                    "token": p["to"],
                }
            )
        return out

    def ended(self) -> list[Doc]:
        """Messages that ended without a delivery: cancelled, missed, failed."""
        return [m for m in self.messages if m["status"] in ENDED_WITHOUT_SUCCESS]

    def deactivated(self) -> list[Doc]:
        return [t for t in self.tokens if not t.get("isActive")]

    def summary(self) -> Doc:
        dels = self.deliveries()
        lat = sorted(d["lateness_ms"] for d in dels)
        return {
            "messages": self.counts,
            "deliveries": dels,
            "ended": [
                {"id": m["_id"], "user": m["userId"], "status": m["status"], "reason": m["reason"]}
                for m in self.ended()
            ],
            "deactivated": [
                {"token": t["token"], "user": t["userId"], "reason": t.get("deactivationReason")}
                for t in self.deactivated()
            ],
            "lateness_ms": {
                "count": len(lat),
                "p50": percentile(lat, 50),
                "max": lat[-1] if lat else None,
            },
        }


def take(database: Database[Doc], fake: FakeExpo) -> Snapshot:
    return Snapshot(
        messages=reads.all_messages(database),
        tokens=reads.all_registrations(database),
        pushes=fake.pushes(),
    )


def render(snap: Snapshot, title: str) -> Group:
    """The live view: upcoming, delivered, ended, deactivated, counts."""
    up = Table(title="upcoming pushes", expand=True)
    for col in ("user", "category", "local", "zone", "UTC instant", "in"):
        up.add_column(col)
    pending = sorted(
        (m for m in snap.messages if m["status"] == Status.PENDING), key=lambda m: m["scheduledAt"]
    )
    for m in pending[:12]:
        secs = (m["scheduledAt"] - snap.at).total_seconds()
        up.add_row(
            Text(m["userId"]),
            m["category"],
            _local(m["scheduledAt"], m["timezone"]),
            m["timezone"],
            _utc(m["scheduledAt"]),
            f"{secs:.0f} s",
        )
    dl = Table(title="delivered (received by the Expo fake)", expand=True)
    for col in ("user", "category", "local", "zone", "received (UTC)", "lateness"):
        dl.add_column(col)
    for d in snap.deliveries()[-12:]:
        received = dt.datetime.fromtimestamp(d["received_at_ms"] / 1000, dt.UTC)
        dl.add_row(
            Text(d["user"]),
            d["category"],
            d["local"],
            d["zone"],
            received.strftime("%H:%M:%S.%f")[:-3] + "Z",
            f"{d['lateness_ms']} ms",
        )
    ev = Table(title="cancellations, misses, failures, deactivations", expand=True)
    for col in ("what", "user", "why"):
        ev.add_column(col, overflow="fold")
    for m in snap.ended():
        ev.add_row(f"{m['status']} {m['category']}", Text(m["userId"]), Text(str(m.get("reason"))))
    for t in snap.deactivated():
        ev.add_row("token deactivated", Text(t["userId"]), Text(str(t.get("deactivationReason"))))
    counts = "  ".join(f"{k}: {v}" for k, v in snap.counts.items())
    return Group(f"[b]{title}[/]  {snap.at:%H:%M:%S}Z   {counts}", up, dl, ev)


class PlainLog:
    """Without a TTY: one line per new event, and the counts whenever they change."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.seen: set[str] = set()
        self.last_counts: dict[str, int] = {}

    def _say(self, key: str, line: str) -> None:
        if key not in self.seen:
            self.seen.add(key)
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def update(self, snap: Snapshot) -> None:
        for m in sorted(snap.messages, key=lambda m: m["scheduledAt"]):
            self._say(
                f"planned:{m['_id']}",
                f"planned   {m['userId']:<5} {m['category']:<10} "
                f"{_local(m['scheduledAt'], m['timezone'])} {m['timezone']:<19} "
                f"= {_utc(m['scheduledAt'])}",
            )
        for d in snap.deliveries():
            self._say(
                f"delivered:{d['id']}",
                f"delivered {d['user']:<5} {d['category']:<10} {d['local']} {d['zone']:<19} "
                f"lateness {d['lateness_ms']} ms",
            )
        for m in snap.ended():
            self._say(
                f"ended:{m['_id']}:{m['status']}",
                f"{m['status']:<9} {m['userId']:<5} {m['category']:<10} {m.get('reason')}",
            )
        for t in snap.deactivated():
            self._say(
                f"deactivated:{t['_id']}",
                f"token deactivated for {t['userId']}: {t.get('deactivationReason')}",
            )
        if snap.counts != self.last_counts:
            self.last_counts = snap.counts
            self.console.print(
                "counts    " + ", ".join(f"{k} {v}" for k, v in snap.counts.items()),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
