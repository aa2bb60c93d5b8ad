"""The state machine's invariant: what the store holds against the oracle (``management_model``).

After every step, read raw (users, registrations, reminders, messages, the change log):
- users, active registrations and reminders (content and version) are the model's;
- no message of any status names a user who is gone (erased messages are anonymised), nor a
  user created again under the id, planned before they were created;
- of the messages due from now on, every pending one is of its reminder's stored version, and
  was not planned for a registration already turned off when it was planned;
- those that may still go (registration active, category on) are exactly the model's
  occurrences up to ``plannedUntil``, once each, and were armed;
- the others (a registration turned off, a category off since they were planned) are of a
  version that was current while their registration was active, in the order the calls were
  made (``Model.seen``: a batch is item after item), and are left to the consumer, which
  rechecks a user stamped in the change log since the wake-up's snapshot (less 30 s): their
  user is stamped so.
Messages due before now are not compared: a change plans from its own instant, and the janitor
ends what is past grace by the earlier of the caller's clock and the database server's.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from tests.unit.management_model import Content, Key, Model

Doc = dict[str, Any]
Raw = Callable[[str], list[Doc]]  # raw(table): every document of users, tokens, reminders...

CHANGE_SKEW = dt.timedelta(seconds=30)  # the consumer rechecks users changed since snapshot - 30 s


def check(model: Model, raw: Raw, now: dt.datetime, armed: Collection[str]) -> None:
    """Assert that the store holds what ``model`` says, as of ``now``."""
    users = {d["_id"]: d for d in raw("users")}
    regs = {d["_id"]: d for d in raw("tokens")}
    reminders = {d["_id"]: d for d in raw("reminders")}
    _accounts(model, users, regs, reminders)
    messages = raw("messages")
    _nothing_of_the_gone(model, users, messages)
    stamps = {d["_id"]: d.get("at") for d in raw("changes")}
    actual: Counter[Key] = Counter()
    slots: Counter[tuple[Any, ...]] = Counter()
    for m in messages:
        if m.get("status") != "pending":
            continue
        slots[(m["reminderId"], m["notificationTokenId"], m["scheduledAt"])] += 1
        if m["scheduledAt"] < now:
            continue
        key = _pending(model, m, reminders, regs, stamps)
        if key is not None:
            assert m["_id"] in armed, f"pending, never armed: {m['_id']}"
            actual[key] += 1
    twice = {k: n for k, n in slots.items() if n > 1}
    assert not twice, f"an occurrence pending more than once on one registration: {twice}"
    want = model.expected(now)
    missing, extra = want - actual, actual - want
    assert not missing and not extra, (
        f"at {now:%Y-%m-%d %H:%M:%S.%f}, planned until {model.planned_until}:\n"
        f"  missing: {sorted(missing.elements())}\n  extra: {sorted(extra.elements())}"
    )


def _accounts(
    model: Model, users: dict[str, Doc], regs: dict[str, Doc], rems: dict[str, Doc]
) -> None:
    assert set(users) == set(model.users), (sorted(users), sorted(model.users))
    for uid, u in model.users.items():
        prefs = users[uid].get("prefs") or {}
        off = {c for c, on in (prefs.get("categories") or {}).items() if not on}
        stored = (users[uid].get("timezone"), prefs.get("enabled", True), off)
        assert stored == (u.zone, u.enabled, u.off), (uid, stored, u)
    active = Counter(
        (g["userId"], g["deviceId"], g["token"]) for g in regs.values() if g["isActive"]
    )
    assert active == model.active(), f"active registrations {active} != {model.active()}"
    left = {g["userId"] for g in regs.values()} - set(model.users)
    assert not left, f"registrations of users who are gone: {left}"
    assert set(rems) == set(model.reminders), (sorted(rems), sorted(model.reminders))
    for rid, r in model.reminders.items():
        d = rems[rid]
        kept = (d["userId"], Content.of(d), d.get("version", 1), bool(d.get("isDeleted")))
        assert kept == (r.user, r.content, r.version, r.deleted), (rid, kept, r)


def _nothing_of_the_gone(model: Model, users: dict[str, Doc], messages: list[Doc]) -> None:
    for m in messages:
        uid = m.get("userId")
        if uid in model.users:
            born = users[uid]["createdAt"]
            assert m["createdAt"] >= born, f"{m['_id']} of {uid} planned before they were created"
        else:
            assert str(uid).startswith("erased-"), f"{m['_id']} names {uid!r}, who is gone"


def _pending(
    model: Model,
    m: Doc,
    reminders: dict[str, Doc],
    regs: dict[str, Doc],
    stamps: dict[str, Any],
) -> Key | None:
    """A pending message due from now on: its key if it may still go, None if the consumer is
    left to cancel it (asserted: it will recheck it)."""
    mid, uid = m["_id"], m["userId"]
    r = reminders.get(m["reminderId"])
    assert r is not None and r["userId"] == uid, f"{mid}: pending, its reminder is gone"
    assert not r.get("isDeleted") and r.get("active", True), f"{mid}: reminder removed or paused"
    assert m["reminderVersion"] == r.get("version", 1), (
        f"{mid}: pending at version {m['reminderVersion']}, stored {r.get('version')}"
    )
    g = regs.get(m["notificationTokenId"])
    assert g is not None and g["userId"] == uid and g["token"] == m["token"], (mid, g)
    off_at = g.get("deactivatedAt")
    assert off_at is None or m["plannedAt"] <= off_at, (
        f"{mid}: planned at {m['plannedAt']} for registration {g['_id']}, off since {off_at}"
    )
    user = model.users[uid]
    if g["isActive"] and user.accepts(m["category"]):
        return (
            m["reminderId"],
            m["reminderVersion"],
            uid,
            g["deviceId"],
            m["token"],
            m["localDate"],
            m["scheduledAt"],
        )
    planned = (m["reminderId"], m["reminderVersion"], uid, g["deviceId"], m["token"])
    assert planned in model.seen, (
        f"{mid}: planned for a registration that was not active while its version was current"
    )
    stamp = stamps.get(uid)
    assert stamp is not None and stamp >= m["plannedAt"] - CHANGE_SKEW, (
        f"{mid}: may no longer go (registration off or category off), and its user "
        f"is not stamped in the change log since it was planned ({stamp})"
    )
    return None
