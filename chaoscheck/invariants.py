"""The six guarantees of docs/architecture.md "Chaos", each a function of one recorded run.

Each returns (checked, violations); a violation is a dict that names the push, the request, the
document or the fault it is about, in full. Instants are epoch seconds; ``window`` is W, the
time before a due instant by which an acknowledged change is honoured.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chaoscheck import localtime
from chaoscheck.intent import AMBIGUOUS, Intent

Doc = dict[str, Any]
EXPECT_SETTLE_S = 20.0  # a rule must stand this long before its due instant to be expected
TOLERANCE_S = 0.0  # nothing may arrive early, not even by a millisecond
GRACE_SLACK_S = 2.0  # a push's own HTTP round trip on top of the category's grace
FAULT_REACH_S = 120.0  # a fault this far before a due instant may still explain its end


@dataclass
class Run:
    meta: Doc
    history: Any  # chaoscheck.history.History
    pushes: list[Doc]
    faults: list[Doc]
    db: dict[str, list[Doc]]
    intent: Intent = field(init=False)

    def __post_init__(self) -> None:
        self.intent = Intent(self.history)

    @property
    def window(self) -> float:
        return float(self.meta.get("window_s", 1.0))

    def grace(self, category: str) -> float:
        return float(self.meta.get("grace", {}).get(category, 0))


def _ts(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def push_time(p: Doc) -> float:
    return float(p["received_at_ms"]) / 1000


def parse_message_id(mid: str) -> tuple[str, str, str, dt.date] | None:
    """(reminder id, version, registration id, local date) of a message id."""
    parts = str(mid).rsplit(":", 3)
    if len(parts) != 4:
        return None
    try:
        return parts[0], parts[1], parts[2], dt.datetime.strptime(parts[3], "%Y%m%d").date()
    except ValueError:
        return None


def placed(run: Run, p: Doc) -> Doc | None:
    """Where a push sits in the rule it names: its local date, the zone it was planned in
    (the one the user's settled zone gives, else the latest due instant not after it) and
    its due instant; ``{"early": due}`` when every zone's instant is after it."""
    data = p.get("data") or {}
    parsed = parse_message_id(data.get("messageId", ""))
    content = run.intent.content(data.get("rev"))
    if parsed is None or content is None:
        return None
    t = push_time(p)
    dues = {}
    for zone in run.intent.zones(str(data.get("uid")), t):
        d = localtime.due(
            content["at"], content["offsetMinutes"], content["weekdays"], zone, parsed[3]
        )
        if d is not None:
            dues[zone] = d.timestamp()
    if not dues:
        return {"local_date": parsed[3], "due": None, "zone": None, "content": content}
    settled_zone = run.intent.user(str(data.get("uid")), t, run.window).get("tz")
    fits = {z: d for z, d in dues.items() if d <= t + TOLERANCE_S}
    if settled_zone in fits:
        zone = settled_zone
    elif fits:
        zone = max(fits, key=lambda z: fits[z])
    else:
        zone = min(dues, key=lambda z: dues[z])
        return {"local_date": parsed[3], "due": dues[zone], "zone": zone, "early": True}
    return {"local_date": parsed[3], "due": dues[zone], "zone": zone, "content": content}


def no_duplicates(run: Run) -> tuple[int, list[Doc]]:
    """1. No install received one occurrence (reminder, version, local date) twice."""
    seen: dict[tuple[str, str, str, str], list[Doc]] = defaultdict(list)
    for p in run.pushes:
        parsed = parse_message_id((p.get("data") or {}).get("messageId", ""))
        if parsed:
            seen[(p["to"], parsed[0], parsed[1], str(parsed[3]))].append(p)
    bad = [
        {"install": k[0], "occurrence": list(k[1:]), "pushes": v}
        for k, v in seen.items()
        if len(v) > 1
    ]
    return len(seen), bad


def no_push_after_install_left(run: Run) -> tuple[int, list[Doc]]:
    """2. No push reached an install after a handover, logout or erasure acknowledged by
    ``received - W`` took it from the push's user."""
    bad = []
    for p in run.pushes:
        uid = str((p.get("data") or {}).get("uid"))
        state = run.intent.install(p["to"], push_time(p), run.window)
        if state is not AMBIGUOUS and (state["holder"] is None or state["holder"][0] != uid):
            bad.append({"push": p, "install_at_push": state, "requests": _requests(run, p)})
    return len(run.pushes), bad


def no_push_for_withdrawn_intent(run: Run) -> tuple[int, list[Doc]]:
    """3. No push for an intent withdrawn (removed, paused, replaced, user or category off,
    zone moved, user erased) by a change acknowledged by ``due - W``."""
    bad = []
    for p in run.pushes:
        where = placed(run, p)
        if where is None or where.get("early") or where["due"] is None:
            continue
        data = p.get("data") or {}
        due = where["due"]
        rem = run.intent.reminder(str(data.get("rid")), due, run.window)
        user = run.intent.user(str(data.get("uid")), due, run.window)
        why = None
        if rem is not AMBIGUOUS and not rem.get("exists"):
            why = "reminder removed"
        elif rem is not AMBIGUOUS and not rem.get("active"):
            why = "reminder paused"
        elif rem is not AMBIGUOUS and rem.get("rev") != data.get("rev"):
            why = f"reminder replaced by rev {rem.get('rev')}"
        elif user is not AMBIGUOUS and not user.get("exists"):
            why = "user erased"
        elif user is not AMBIGUOUS and not user.get("enabled"):
            why = "user off"
        elif user is not AMBIGUOUS and user["categories"].get(data.get("category")) is False:
            why = "category off"
        elif user is not AMBIGUOUS and user.get("tz") != where["zone"]:
            why = f"zone moved from {where['zone']} to {user.get('tz')}"
        if why:
            bad.append({"why": why, "push": p, "due": _iso(due), "requests": _requests(run, p)})
    return len(run.pushes), bad


def nothing_early(run: Run) -> tuple[int, list[Doc]]:
    """4. No push arrived before its due instant (in any zone the user was given), and every
    push names a local date its rule has."""
    bad = []
    for p in run.pushes:
        where = placed(run, p)
        if where is None:
            bad.append({"why": "names no rule the history gave", "push": p})
        elif where["due"] is None:
            bad.append({"why": "its local date is not one of the rule's weekdays", "push": p})
        elif where.get("early"):
            early = where["due"] - push_time(p)
            bad.append({"why": f"{early:.3f} s early", "due": _iso(where["due"]), "push": p})
    return len(run.pushes), bad


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds")


def _requests(run: Run, p: Doc) -> list[Doc]:
    """The requests about the push's user and reminder, for a violation's story."""
    data = p.get("data") or {}
    uid, rid = str(data.get("uid")), str(data.get("rid"))
    out = []
    for c in run.history.changes:
        if c.user == uid and (c.kind not in ("reminder", "patch", "remove") or c.key == rid):
            rec = run.history.records[c.request]
            out.append({"kind": c.kind, "outcome": c.outcome, **rec})
    return out[-12:]
