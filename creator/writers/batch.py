"""A batch: user changes, logins and reminders under ids the caller chose, applied as if one
after the other, in order, each answered on its own (the stored document, or the error its
single call would have raised). A single call is a batch of one.

The database's work is done in a few bulk round trips: each write costs the server here a
commit (about 10 ms with its log synced on commit, concurrent writers queue for it), so a batch
pays a handful of commits, not a handful per item. Where order matters, the batch is applied
item by item through the writers' single calls (rare; exactness over speed): one that names the
same user, device, token string or reminder twice, a reminder before a change of its user, a
zone change of an existing user after a login. Anything the bulk path cannot settle alone (a
zone change, a changed reminder, a login that lost a race with a concurrent one) goes through
the single call too.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from creator.planner import Known, PassReport
from creator.writers import Writers
from creator.writers.base import Batch, Done, Later, Outcome, erased_meanwhile, guard
from creator.writers.logins import Login
from creator.writers.reminders import ReminderPut
from creator.writers.users import UserChange
from shared.domain.messages import Doc
from shared.errors import PermanentError
from shared.store import erasure

Item = UserChange | Login | ReminderPut


def apply(w: Writers, items: Sequence[Item]) -> list[Outcome]:
    """Apply ``items`` as if one after the other; one outcome per item, in order."""
    if not items:
        return []
    ordered = _repeats(items) or _reminder_before_its_user(items)
    users: dict[str, Doc] = {}
    if not ordered:
        users = w.stores.users.get_many({it.user_id for it in items})
    if ordered or _zone_change_after_login(items, users):
        done = [one(w, it) for it in items]  # each single call looks for an erasure itself
        _plan(w, items, done, set())
        return done
    out: list[Outcome | None] = [None] * len(items)
    to_plan: set[str] = set()  # users with a new registration, reminder or setting
    to_stamp: set[str] = set()  # existing users whose settings changed
    later: Later = []  # single calls, at the end
    mine = list(enumerate(items))
    created_at, fresh = w.users.apply_many(
        [(i, it) for i, it in mine if isinstance(it, UserChange)], users, out, to_plan, to_stamp
    )

    def user_ready(i: int, user_id: str) -> bool:
        return user_id in users or created_at.get(user_id, len(items)) < i

    batch = Batch(out, to_plan, later, user_ready)
    w.logins.register_many([(i, it) for i, it in mine if isinstance(it, Login)], batch)
    w.reminders.put_many([(i, it) for i, it in mine if isinstance(it, ReminderPut)], batch)
    # New users last: until their document exists no other call can attach anything to them
    # (a login or reminder for them is a 404), so what this call holds of them is all they have
    # and they are planned from it, without reading back what was just written.
    inserted = w.users.insert_many(fresh, out, to_plan, to_stamp)
    read = _first_read(items, out, users)
    for i, action, args in later:  # each compares the user it reads with the one read here
        uid = items[i].user_id
        out[i] = guard(functools.partial(action, born=read[uid]) if uid in read else action, *args)
    # The change log makes consumers recheck wake-ups planned before a change. Only changed
    # settings need it: a new user, registration or reminder changes no wake-up planned before
    # (what they replace is stamped where it ends, by ``tokens.stamped`` and the versions).
    if to_stamp:
        w.stores.changes.record(to_stamp, w.now)
    outcomes = [o if o is not None else PermanentError("not applied") for o in out]
    report = _plan(w, items, outcomes, to_plan, _held(items, outcomes, inserted))
    alone = {i for i, _, _ in later}
    w.versions.settle(_created_reminders(items, outcomes, alone))
    return _undo_if_erased(w, items, outcomes, report, read, alone)


def register_tokens(w: Writers, logins: Sequence[Login]) -> list[Outcome]:
    """Many logins at once, each as ``LoginWriter.register`` would do it alone."""
    return apply(w, logins)


def one(w: Writers, it: Item) -> Outcome:
    """One item through its writer's single call."""
    if isinstance(it, UserChange):
        return guard(lambda: Done(w.users.upsert(it), "changed"))
    if isinstance(it, Login):
        return guard(w.logins.login, it)
    return guard(w.reminders.put, it.user_id, it.reminder_id, it.spec)


def _created_reminders(
    items: Sequence[Item], outcomes: Sequence[Outcome], alone: Collection[int]
) -> dict[tuple[str, str], int]:
    """The reminders the bulk path created (version 1), by user and reminder id: settled after
    the batch's planning as a single call settles its own (``ReminderVersions.settle``)."""
    return {
        (it.user_id, it.reminder_id): 1
        for i, (it, o) in enumerate(zip(items, outcomes, strict=True))
        if i not in alone
        and isinstance(it, ReminderPut)
        and isinstance(o, Done)
        and o.change == "created"
    }


def _first_read(
    items: Sequence[Item], out: Sequence[Outcome | None], users: Mapping[str, Doc]
) -> dict[str, Any]:
    """Each user's ``createdAt`` as this call first read it; for a user it created itself (or
    found created by another call meanwhile), as written or read back then. Never as its own
    change of an existing user read back: that read may find another user, erased and created
    again since the first read."""
    read = erasure.incarnations_of(users)
    for it, o in zip(items, out, strict=True):
        if not (isinstance(it, UserChange) and isinstance(o, Done)):
            continue
        if it.user_id not in read or o.change == "created":
            read[it.user_id] = o.doc.get("createdAt")
    return read


def _undo_if_erased(
    w: Writers,
    items: Sequence[Item],
    outcomes: list[Outcome],
    report: PassReport,
    read: Mapping[str, Any],
    checked: Collection[int],
) -> list[Outcome]:
    """Registrations and reminders this call created for users erased meanwhile are deleted,
    what it planned for a login sent again of such a user is ended, and those items answered
    404 (``ErasureWriter.undo_if_erased``; ``read``: the users' ``createdAt`` as this call read
    or wrote them). ``checked``: items applied by a single call, which looked for itself."""
    candidates = [
        (i, it, o)
        for i, (it, o) in enumerate(zip(items, outcomes, strict=True))
        if i not in checked
        and isinstance(o, Done)
        and (o.change == "created" or (o.change == "unchanged" and isinstance(it, Login)))
        and isinstance(it, Login | ReminderPut)
    ]
    regs: dict[str, list[str]] = {}
    rems: dict[str, list[str]] = {}
    kept: dict[str, list[str]] = {}  # logins sent again: planned again from what was found
    for _, it, o in candidates:
        if isinstance(it, Login):
            into = regs if o.change == "created" else kept
            into.setdefault(it.user_id, []).append(str(o.doc["_id"]))
        elif isinstance(it, ReminderPut):
            rems.setdefault(it.user_id, []).append(it.reminder_id)
    gone = w.erasure.undo_if_erased(
        report, read=read, registrations=regs, reminders=rems, kept=kept
    )
    out = list(outcomes)
    for i, it, _ in candidates:
        if it.user_id in gone:
            out[i] = erased_meanwhile(it.user_id)
    return out


def _held(items: Sequence[Item], outcomes: Sequence[Outcome], inserted: dict[str, Doc]) -> Known:
    """Everything of the users this call inserted: their document, and the registrations and
    reminders of theirs this call wrote or found (nothing else can have been attached to them:
    they did not exist)."""
    known = Known(users=dict(inserted))
    for uid in inserted:
        known.tokens[uid] = []
        known.reminders[uid] = []
    for it, o in zip(items, outcomes, strict=True):
        if not isinstance(o, Done) or it.user_id not in inserted:
            continue
        if isinstance(it, Login) and o.doc.get("isActive"):
            known.tokens[it.user_id].append(o.doc)
        elif isinstance(it, ReminderPut):
            known.reminders[it.user_id].append(o.doc)
    return known


def _plan(
    w: Writers,
    items: Sequence[Item],
    outcomes: Sequence[Outcome],
    to_plan: set[str],
    known: Known | None = None,
) -> PassReport:
    """Plan what the items added: a new or changed user whole; a login, only its registration;
    a reminder, only that reminder (what the user's other devices and reminders have is planned
    and armed already: planning it again would insert duplicates and arm wake-ups again).

    Logins and reminders found already stored are planned too: one may have been written by an
    attempt that an outage cut before its planning (the last step), and the backend's resend is
    its only chance before the planner's next window. Planning again is idempotent."""
    whole = {
        it.user_id
        for it, o in zip(items, outcomes, strict=True)
        if isinstance(it, UserChange) and isinstance(o, Done) and it.user_id in to_plan
    }
    regs: dict[str, dict[str, Doc]] = {}  # the registrations written or found, by user
    rems: dict[str, set[str]] = {}
    for it, o in zip(items, outcomes, strict=True):
        if not isinstance(o, Done) or it.user_id in whole:
            continue
        if isinstance(it, Login):
            regs.setdefault(it.user_id, {})[str(o.doc.get("_id"))] = o.doc
        elif isinstance(it, ReminderPut):
            rems.setdefault(it.user_id, set()).add(it.reminder_id)
    report = PassReport()
    reports = []
    if whole:
        reports.append(w.planner.plan_users(sorted(whole), known=known))
    if regs:
        # Planned from the registrations just written, not read back; the user and its
        # reminders are read (after the write: ``Known``).
        held = Known(tokens={uid: list(docs.values()) for uid, docs in regs.items()})
        ids = {tid for docs in regs.values() for tid in docs}
        reports.append(w.planner.plan_users(sorted(regs), tokens=ids, known=held))
    if rems:
        reports.append(w.planner.plan_users(sorted(rems), reminders=set().union(*rems.values())))
    for r in reports:
        report.alive.update(r.alive)
        report.erased |= r.erased
    for uid in report.erased:
        report.alive.pop(uid, None)
    return report


def _repeats(items: Sequence[Item]) -> bool:
    """Whether the batch names a user, device, token string or reminder twice."""
    keys: Counter[tuple[str, str]] = Counter()
    for it in items:
        if isinstance(it, UserChange):
            keys[("user", it.user_id)] += 1
        elif isinstance(it, Login):
            keys[("device", it.device)] += 1
            keys[("token", it.token.strip())] += 1
        else:
            keys[("reminder", it.reminder_id)] += 1
    return any(n > 1 for n in keys.values())


def _reminder_before_its_user(items: Sequence[Item]) -> bool:
    """Whether a reminder comes before an item changing its user. The bulk path applies the
    users first, and a new time zone bumps every reminder of the user and cancels what the
    old version planned: a reminder put before the zone changes must get that bump too (alone
    it would), and a replaced reminder's messages the reason of the step that ended them."""
    seen: set[str] = set()
    for it in items:
        if isinstance(it, ReminderPut):
            seen.add(it.user_id)
        elif isinstance(it, UserChange) and it.user_id in seen:
            return True
    return False


def _zone_change_after_login(items: Sequence[Item], users: Mapping[str, Doc]) -> bool:
    """Whether a new time zone for an existing user (``users``: as stored) comes after a login.
    The bulk path applies the users first, and a zone change plans the user's registrations at
    once: a login before it may take one of them over (another user on the install), and
    nothing may be planned for a registration it deactivated."""
    login = False
    for it in items:
        if isinstance(it, Login):
            login = True
        elif login and isinstance(it, UserChange) and it.timezone is not None:
            stored = users.get(it.user_id)
            if stored is not None and stored.get("timezone") != it.timezone:
                return True
    return False


__all__ = [
    "Done",
    "Item",
    "Login",
    "Outcome",
    "ReminderPut",
    "UserChange",
    "apply",
    "one",
    "register_tokens",
]
