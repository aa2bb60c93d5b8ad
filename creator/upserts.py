"""Upserts under ids the caller chose, one or many at once: what an app backend sends.

``put_reminder`` creates or replaces one reminder under a client id (the same content again
changes nothing). ``register_tokens`` is many logins at once and ``apply`` a whole onboarding
batch (users, logins, reminders). Both follow the rules of the one-at-a-time calls in
``creator.manage`` (the same field checks, the same "one active registration per device and per
token string", the same change stamps and planning), with the database's work done in a few bulk
round trips: each write costs the server here a commit (about 10 ms with its log synced on
commit, concurrent writers queue for it), so a login or a batch pays a handful of commits, not a
handful per item. Each item still gets its own answer: the stored document, or the error its
single call would have raised.

A batch is applied as if item after item, in order: a login or reminder whose user neither exists
nor is created by an earlier item is refused (NotFoundError), as it would be alone. A batch that
names the same user, device, token string or reminder twice is applied one item at a time, in
order (rare; exactness over speed). Anything the bulk path cannot settle alone (a time zone
change, a changed reminder, a login that lost a race with a concurrent one) goes through the
single call.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pymongo import UpdateOne
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from creator.manage import (
    SUPERSEDE_TRIES,
    UNREAD,
    Manager,
    check_same_user,
    erased_meanwhile,
    new_reminder,
    next_version,
    reminder_busy,
    user_update,
)
from creator.planner import Known, PassReport
from shared.domain.messages import Doc
from shared.domain.validation import validate_expo_token, validate_id
from shared.errors import ConflictError, NotFoundError, PermanentError, TzpushError
from shared.store import db as dbm
from shared.store import erasure, tokens
from shared.store.intent import record_changes

log = logging.getLogger(__name__)

Created = Literal["created", "changed", "unchanged"]


@dataclass(frozen=True)
class ReminderSpec:
    """A reminder's fields as the Manager takes them (weekdays 0 = Monday)."""

    category: str
    label: str
    at: str
    offset_minutes: int = 0
    weekdays: Collection[int] | None = None
    title: str | None = None
    body: str | None = None
    data: Mapping[str, Any] | None = None
    active: bool = True


@dataclass(frozen=True)
class UserChange:
    """``Manager.upsert_user``'s arguments (``False``: leave as stored, ``None``: clear)."""

    user_id: str
    timezone: str | None = None
    enabled: bool | None = None
    categories: Mapping[str, bool] | None = None
    quiet_hours: tuple[str, str] | Literal[False] | None = False
    daily_cap: int | Literal[False] | None = False


@dataclass(frozen=True)
class Login:
    user_id: str
    device: str
    token: str


@dataclass(frozen=True)
class ReminderPut:
    user_id: str
    reminder_id: str
    spec: ReminderSpec


Item = UserChange | Login | ReminderPut


@dataclass(frozen=True)
class Done:
    """An item applied: the stored document and what happened to it."""

    doc: Doc
    change: Created


Outcome = Done | TzpushError


# -- one reminder ---------------------------------------------------------------------------
def put_reminder(
    m: Manager,
    user_id: str,
    reminder_id: str,
    spec: ReminderSpec,
    *,
    patch: Callable[[Doc], ReminderSpec] | None = None,
    born: Any = UNREAD,
) -> Done:
    """Create or replace the reminder ``reminder_id`` of ``user_id``, and plan it at once.

    The same content again changes nothing (no new version, nothing cancelled). Reminder ids are
    global: an id another user holds is a ``ConflictError``. A change of the same reminder that
    gets in between this one's read and its write makes this one start over from what is there
    then (``Manager.supersede``); a ``ConflictError`` after ``SUPERSEDE_TRIES`` such races.
    ``patch``: the content is ``patch(stored)``, of the reminder as read each time (a PATCH
    changes its own fields, not the ones a change that got in first wrote); ``spec`` is
    ``patch`` of the reminder as the caller read it. ``born``: the user's ``createdAt`` as the
    caller read it first (a batch), compared as this call's own first read is.
    """
    first = user = m.get_user(user_id)
    check_same_user(first, born)  # erased and created again since the caller's read: a 404
    validate_id(reminder_id, "reminder id")
    fields = _fields(m, spec)
    for attempt in range(SUPERSEDE_TRIES):
        if attempt:  # erased meanwhile: a 404, not the reminder written again with its text
            user = m.get_user(user_id)
            check_same_user(user, first.get("createdAt"))  # and created again: not this user
        done = _put_once(m, user, user_id, reminder_id, fields, patch)
        if done is not None:
            return done
    raise reminder_busy(reminder_id)


def _put_once(
    m: Manager,
    user: Doc,
    user_id: str,
    reminder_id: str,
    fields: Doc,
    patch: Callable[[Doc], ReminderSpec] | None,
) -> Done | None:
    """``put_reminder`` from the reminder as read now; None when another change got in first."""
    coll = m.db[dbm.REMINDERS]
    existing = coll.find_one({"_id": reminder_id})
    if patch is not None:  # a PATCH neither creates nor revives: removed meanwhile is a 404
        if existing is None or existing.get("isDeleted") or existing.get("userId") != user_id:
            raise NotFoundError(f"no reminder {reminder_id!r} for user {user_id!r}")
        fields = _fields(m, patch(existing))
    if existing is None:
        doc = new_reminder(user_id, reminder_id, fields, m.now)
        try:
            coll.insert_one(doc)
        except DuplicateKeyError:  # a concurrent PUT of the same id won: replace it
            return None
        record_changes(m.db, [user_id], m.now)
        report = m.planner.plan_users([user_id], reminders=[reminder_id])
        read = erasure.incarnations_of({user_id: user})
        if m.undo_if_erased(report, read=read, reminders={user_id: [reminder_id]}):
            raise erased_meanwhile(user_id)
        m.settle(user_id, {reminder_id: 1})
        return Done(doc, "created")
    _check_owner(existing, user_id, reminder_id)
    revived = bool(existing.get("isDeleted"))
    if not revived and _same(existing, fields):
        # Maybe stored by an attempt an outage cut before its planning: plan it now (idempotent).
        m.planner.plan_users([user_id], reminders=[reminder_id])
        return Done(existing, "unchanged")
    why = "reminder replaced" if not revived else "reminder re-created"
    if not m.supersede(existing, user, why, extra={**fields, "isDeleted": False}):
        return None
    record_changes(m.db, [user_id], m.now)
    m.planner.plan_users([user_id], reminders=[reminder_id])
    m.settle(user_id, {reminder_id: next_version(existing)})
    stored = coll.find_one({"_id": reminder_id})
    # Erased since the write (the erasure removed the reminder), perhaps created again and the id
    # put by the new person: nothing of this change is left to answer with (the planning ended
    # what it inserted for them: ``Planner._drop_erased``).
    if (
        stored is None
        or stored.get("userId") != user_id
        or stored.get("createdAt") != existing.get("createdAt")
    ):
        raise erased_meanwhile(user_id)
    return Done(stored, "created" if revived else "changed")


# -- many logins ----------------------------------------------------------------------------
def register_tokens(m: Manager, logins: Sequence[Login]) -> list[Outcome]:
    """Many logins at once, each as ``Manager.register_token`` would do it alone."""
    return apply(m, logins)


# -- a batch --------------------------------------------------------------------------------
def apply(m: Manager, items: Sequence[Item]) -> list[Outcome]:
    """Apply ``items`` as if one after the other; one outcome per item, in order."""
    if not items:
        return []
    ordered = _repeats(items) or _reminder_before_its_user(items)
    ids = {it.user_id for it in items}
    users: dict[str, Doc] = {}
    if not ordered:
        users = {d["_id"]: d for d in m.db[dbm.USERS].find({"_id": {"$in": sorted(ids)}})}
    if ordered or _zone_change_after_login(items, users):
        done = [_one(m, it) for it in items]  # each single call looks for an erasure itself
        _plan(m, items, done, set())
        return done
    out: list[Outcome | None] = [None] * len(items)
    to_plan: set[str] = set()  # users with a new registration, reminder or setting
    to_stamp: set[str] = set()  # existing users whose settings changed
    later: list[tuple[int, Callable[..., Done], tuple[Any, ...]]] = []  # single calls, at the end
    created_at, fresh = _apply_users(m, items, users, out, to_plan, to_stamp)

    def user_ready(i: int, user_id: str) -> bool:
        return user_id in users or created_at.get(user_id, len(items)) < i

    _apply_logins(m, items, user_ready, out, to_plan, later)
    _apply_reminders(m, items, user_ready, out, to_plan, later)
    # New users last: until their document exists no other call can attach anything to them
    # (a login or reminder for them is a 404), so what this call holds of them is all they have
    # and they are planned from it, without reading back what was just written.
    inserted = _insert_users(m, fresh, out, to_plan, to_stamp)
    read = _first_read(items, out, users)
    for i, action, args in later:  # each compares the user it reads with the one read here
        uid = items[i].user_id
        out[i] = _guard(functools.partial(action, born=read[uid]) if uid in read else action, *args)
    # The change log makes consumers recheck wake-ups planned before a change. Only changed
    # settings need it: a new user, registration or reminder changes no wake-up planned before
    # (what they replace, a registration taken over or an old reminder version, is stamped where
    # it ends, by ``tokens.deactivate`` and ``put_reminder``).
    if to_stamp:
        record_changes(m.db, to_stamp, m.now)
    outcomes = [o if o is not None else PermanentError("not applied") for o in out]
    report = _plan(m, items, outcomes, to_plan, _held(items, outcomes, inserted))
    return _undo_if_erased(m, items, outcomes, report, read, {i for i, _, _ in later})


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
    m: Manager,
    items: Sequence[Item],
    outcomes: list[Outcome],
    report: PassReport,
    read: Mapping[str, Any],
    checked: Collection[int],
) -> list[Outcome]:
    """Registrations and reminders this call created for users erased meanwhile are deleted,
    what it planned for a login sent again of such a user is ended, and those items answered
    404 (``Manager.undo_if_erased``; ``read``: the users' ``createdAt`` as this call read or
    wrote them). ``checked``: items applied by a single call (``register_token``,
    ``put_reminder``), which looked for itself."""
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
    gone = m.undo_if_erased(report, read=read, registrations=regs, reminders=rems, kept=kept)
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
    m: Manager,
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
        reports.append(m.planner.plan_users(sorted(whole), known=known))
    if regs:
        # Planned from the registrations just written, not read back; the user and its
        # reminders are read (after the write: ``Known``).
        held = Known(tokens={uid: list(docs.values()) for uid, docs in regs.items()})
        ids = {tid for docs in regs.values() for tid in docs}
        reports.append(m.planner.plan_users(sorted(regs), tokens=ids, known=held))
    if rems:
        reports.append(m.planner.plan_users(sorted(rems), reminders=set().union(*rems.values())))
    for r in reports:
        report.alive.update(r.alive)
        report.erased |= r.erased
    for uid in report.erased:
        report.alive.pop(uid, None)
    return report


def _apply_users(
    m: Manager,
    items: Sequence[Item],
    users: dict[str, Doc],
    out: list[Outcome | None],
    to_plan: set[str],
    to_stamp: set[str],
) -> tuple[dict[str, int], list[tuple[int, str, Doc]]]:
    """Changed users in one bulk write; a new time zone for an existing user goes the single way
    (its pending messages move). Returns the index of each user to create, and their documents
    (inserted last, by ``_insert_users``)."""
    ops: list[UpdateOne] = []
    done: list[tuple[int, str]] = []
    fresh: list[tuple[int, str, Doc]] = []
    created: dict[str, int] = {}
    for i, it in enumerate(items):
        if not isinstance(it, UserChange):
            continue
        existing = users.get(it.user_id)
        if (
            existing is not None
            and it.timezone is not None
            and it.timezone != existing.get("timezone")
        ):
            out[i] = _guard(_upsert, m, it)
            continue
        try:
            validate_id(it.user_id, "user id")
            sets = m.user_sets(
                it.user_id,
                existing,
                timezone=it.timezone,
                enabled=it.enabled,
                categories=it.categories,
                quiet_hours=it.quiet_hours,
                daily_cap=it.daily_cap,
            )
        except TzpushError as exc:
            out[i] = exc
            continue
        if existing is None:
            created[it.user_id] = i
            fresh.append((i, it.user_id, _new_user(it.user_id, sets)))
        else:
            # Only with a zone may it create the user (erased since the read): ``upsert_user``.
            update = user_update(it.user_id, sets)
            ops.append(UpdateOne({"_id": it.user_id}, update, upsert="timezone" in sets))
            done.append((i, it.user_id))
    if ops:
        _update_users(m, ops, done, out, to_plan, to_stamp)
    return created, fresh


def _update_users(
    m: Manager,
    ops: list[UpdateOne],
    done: list[tuple[int, str]],
    out: list[Outcome | None],
    to_plan: set[str],
    to_stamp: set[str],
) -> None:
    result = m.db[dbm.USERS].bulk_write(ops, ordered=False)
    created = set((result.upserted_ids or {}).values())  # erased since the read: made again
    ids = [u for _, u in done]
    stored = {d["_id"]: d for d in m.db[dbm.USERS].find({"_id": {"$in": ids}})}
    for i, uid in done:
        if uid not in stored:  # erased since the read, and not created again by the change
            out[i] = erased_meanwhile(uid)
            continue
        out[i] = Done(stored[uid], "created" if uid in created else "changed")
        to_plan.add(uid)
        to_stamp.add(uid)


def _insert_users(
    m: Manager,
    fresh: list[tuple[int, str, Doc]],
    out: list[Outcome | None],
    to_plan: set[str],
    to_stamp: set[str],
) -> dict[str, Doc]:
    """New users in one insert (cheaper than upserts here); one a concurrent call created
    meanwhile is updated instead, as its single call would have done. Returns those inserted."""
    if not fresh:
        return {}
    taken = _refused(m.db[dbm.USERS], [doc for _, _, doc in fresh])
    inserted: dict[str, Doc] = {}
    ops: list[UpdateOne] = []
    done: list[tuple[int, str]] = []
    for k, (i, uid, doc) in enumerate(fresh):
        if k in taken:
            skip = ("_id", "createdAt", "bucket")
            sets = {key: value for key, value in _flat(doc).items() if key not in skip}
            ops.append(UpdateOne({"_id": uid}, user_update(uid, sets), upsert=True))
            done.append((i, uid))
        else:
            out[i] = Done(doc, "created")
            to_plan.add(uid)
            inserted[uid] = doc
    if ops:
        _update_users(m, ops, done, out, to_plan, to_stamp)
    return inserted


def _apply_logins(
    m: Manager,
    items: Sequence[Item],
    user_ready: Callable[[int, str], bool],
    out: list[Outcome | None],
    to_plan: set[str],
    later: list[tuple[int, Callable[..., Done], tuple[Any, ...]]],
) -> None:
    todo: list[tuple[int, Login, str]] = []
    for i, it in enumerate(items):
        if not isinstance(it, Login):
            continue
        try:
            token = validate_expo_token(it.token)
            validate_id(it.device, "device id")
            validate_id(it.user_id, "user id")
            if not user_ready(i, it.user_id):
                raise NotFoundError(f"no user {it.user_id!r}")
        except TzpushError as exc:
            out[i] = exc
            continue
        todo.append((i, it, token))
    if not todo:
        return
    # Inserted first: a new install (the usual login) is refused by neither unique index
    # (one active registration per device id, one per token string) and needs no lookup. Only
    # the logins refused look up what holds their device or token string: the same login sent
    # again, or one that replaces another registration (2 lookups a batch saved for new
    # installs; a login sent again pays the refused insert: docs/performance.md).
    now = m.now
    first = [(i, it, tokens.new_registration(it.user_id, it.device, t, now)) for i, it, t in todo]
    refused = _insert_logins(m, first, out, to_plan)
    if refused:
        _replace_logins(m, [(i, it, doc["token"]) for i, it, doc in refused], out, to_plan, later)


def _insert_logins(
    m: Manager, new: list[tuple[int, Login, Doc]], out: list[Outcome | None], to_plan: set[str]
) -> list[tuple[int, Login, Doc]]:
    """Insert the logins' new registrations (unordered): each stored is answered "created" and
    its user planned; returns those the database refused (their device id or token string is
    held, or was taken by a concurrent login)."""
    if not new:
        return []
    lost = _refused(m.db[dbm.TOKENS], [doc for _, _, doc in new])
    for k, (i, it, doc) in enumerate(new):
        if k not in lost:
            out[i] = Done(doc, "created")
            to_plan.add(it.user_id)
    return [row for k, row in enumerate(new) if k in lost]


def _replace_logins(
    m: Manager,
    todo: list[tuple[int, Login, str]],
    out: list[Outcome | None],
    to_plan: set[str],
    later: list[tuple[int, Callable[..., Done], tuple[Any, ...]]],
) -> None:
    """Logins whose device id or token string an active registration holds: the same login
    sent again (found, planned again), or one replacing the registration that holds it."""
    coll = m.db[dbm.TOKENS]
    devices = sorted({it.device for _, it, _ in todo})
    strings = sorted({t for _, _, t in todo})
    current = {d["_id"]: d for d in coll.find({"deviceId": {"$in": devices}, "isActive": True})}
    for d in coll.find({"token": {"$in": strings}, "isActive": True}):
        current.setdefault(d["_id"], d)
    now = m.now
    replaced: list[str] = []
    new: list[tuple[int, Login, Doc]] = []
    for i, it, token in todo:
        near = [d for d in current.values() if tokens.holds(d, it.device, token)]
        mine = [d for d in near if tokens.same_login(d, it.user_id, it.device, token)]
        replaced += [d["_id"] for d in near if d not in mine]
        if mine:
            out[i] = Done(mine[0], "unchanged")
        else:
            new.append((i, it, tokens.new_registration(it.user_id, it.device, token, now)))
    if replaced:
        reason = f"{tokens.TOKEN_REPLACED} by a new login on the install"
        tokens.deactivate(m.db, {"_id": {"$in": sorted(set(replaced))}}, reason, now)
    # Refused again (a concurrent login took them): the single call, after the new users are
    # in (it needs its user).
    for i, it, _ in _insert_logins(m, new, out, to_plan):
        later.append((i, _login, (m, it)))


def _apply_reminders(
    m: Manager,
    items: Sequence[Item],
    user_ready: Callable[[int, str], bool],
    out: list[Outcome | None],
    to_plan: set[str],
    later: list[tuple[int, Callable[..., Done], tuple[Any, ...]]],
) -> None:
    todo: list[tuple[int, ReminderPut, Doc]] = []
    for i, it in enumerate(items):
        if not isinstance(it, ReminderPut):
            continue
        try:
            validate_id(it.user_id, "user id")
            validate_id(it.reminder_id, "reminder id")
            fields = _fields(m, it.spec)
            if not user_ready(i, it.user_id):
                raise NotFoundError(f"no user {it.user_id!r}")
        except TzpushError as exc:
            out[i] = exc
            continue
        todo.append((i, it, fields))
    if not todo:
        return
    coll = m.db[dbm.REMINDERS]
    ids = sorted(it.reminder_id for _, it, _ in todo)
    stored = {d["_id"]: d for d in coll.find({"_id": {"$in": ids}})}
    now = m.now
    new: list[tuple[int, ReminderPut, Doc]] = []
    for i, it, fields in todo:
        existing = stored.get(it.reminder_id)
        if existing is None:
            new.append((i, it, new_reminder(it.user_id, it.reminder_id, fields, now)))
        elif existing.get("userId") != it.user_id:
            out[i] = _guard(_check_owner, existing, it.user_id, it.reminder_id)
        elif not existing.get("isDeleted") and _same(existing, fields):
            out[i] = Done(existing, "unchanged")
        else:  # a changed or re-created reminder: its old version's pending messages end
            later.append((i, put_reminder, (m, it.user_id, it.reminder_id, it.spec)))
    if not new:
        return
    lost = _refused(coll, [doc for _, _, doc in new])  # a concurrent PUT of the id won
    for k, (i, it, doc) in enumerate(new):
        if k in lost:
            later.append((i, put_reminder, (m, it.user_id, it.reminder_id, it.spec)))
        else:
            out[i] = Done(doc, "created")
            to_plan.add(it.user_id)


# -- internals ------------------------------------------------------------------------------
def _refused(coll: MongoCollection[Doc], docs: list[Doc]) -> set[int]:
    """Insert ``docs`` (unordered); the positions of those the database refused, which their
    single call then settles (a concurrent call took their id, device or token string)."""
    try:
        coll.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        return {int(e["index"]) for e in exc.details.get("writeErrors", [])}
    return set()


def _one(m: Manager, it: Item) -> Outcome:
    """One item through its single call."""
    if isinstance(it, UserChange):
        return _guard(_upsert, m, it)
    if isinstance(it, Login):
        return _guard(_login, m, it)
    return _guard(put_reminder, m, it.user_id, it.reminder_id, it.spec)


def _upsert(m: Manager, it: UserChange) -> Done:
    return Done(_upsert_doc(m, it), "changed")


def _upsert_doc(m: Manager, it: UserChange) -> Doc:
    return m.upsert_user(
        it.user_id,
        timezone=it.timezone,
        enabled=it.enabled,
        categories=it.categories,
        quiet_hours=it.quiet_hours,
        daily_cap=it.daily_cap,
    )


def _login(m: Manager, it: Login, born: Any = UNREAD) -> Done:
    doc = m.register_token(it.user_id, device=it.device, token=it.token, born=born)
    return Done(doc, "created")


def _guard(action: Callable[..., Done], *args: Any) -> Outcome:
    """The action's result, or the project error it raised (anything else propagates)."""
    try:
        return action(*args)
    except TzpushError as exc:
        return exc


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


def _new_user(user_id: str, sets: Doc) -> Doc:
    """The document ``user_update(user_id, sets)`` would create (dotted keys nested)."""
    doc: Doc = {"_id": user_id}
    update = user_update(user_id, sets)
    for key, value in {**update["$set"], **update["$setOnInsert"]}.items():
        *path, last = key.split(".")
        node = doc
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return doc


def _flat(doc: Doc, prefix: str = "") -> Doc:
    """Nested fields as dotted keys (the inverse of ``_new_user``'s nesting)."""
    out: Doc = {}
    for key, value in doc.items():
        if isinstance(value, dict) and key in ("prefs", "categories"):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _fields(m: Manager, spec: ReminderSpec) -> Doc:
    fields = m.reminder_fields(
        spec.category,
        spec.label,
        spec.at,
        spec.offset_minutes,
        spec.weekdays,
        spec.title,
        spec.body,
        spec.data,
    )
    fields["active"] = spec.active
    return fields


def _same(existing: Doc, fields: Doc) -> bool:
    return all(existing.get(k) == v for k, v in fields.items())


def _check_owner(existing: Doc, user_id: str, reminder_id: str) -> Done:
    if existing.get("userId") != user_id:
        raise ConflictError(
            f"reminder id {reminder_id!r} is used by another user: reminder ids are global, "
            "choose another (a UUID, for example)"
        )
    return Done(existing, "unchanged")
