"""Users, reminders and tokens: validated where they enter, planned at once after each change.

Every change that can alter what a user should receive stamps ``intent_changes`` (consumers
recheck such users in full at send time), cancels pending messages that no longer hold, and
re-plans the user for the already-planned window, so nothing is sent at an old instant and a new
reminder does not wait for the next pass.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from creator.planner import PassReport, Planner
from shared.domain.backoff import compute_backoff
from shared.domain.intent import REMINDER_CHANGED
from shared.domain.localtime import occurrences_between, parse_hhmm, validate_timezone
from shared.domain.messages import Doc
from shared.domain.plan import bucket_of
from shared.domain.validation import (
    category_problem,
    validate_daily_cap,
    validate_expo_token,
    validate_id,
    validate_label,
    validate_payload,
)
from shared.errors import ConflictError, InputError, NotFoundError, TransientError
from shared.settings import Settings
from shared.store import db as dbm
from shared.store import erasure, reminders, tokens
from shared.store.intent import record_changes
from shared.store.partitions import watermarks

log = logging.getLogger(__name__)

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
UNREAD: Any = object()  # no ``born`` given: a call's own read of the user is the first
# What a reminder change may name (``update_reminder``).
MERGED = frozenset(
    ("category", "label", "at", "offset_minutes", "weekdays", "title", "body", "data")
)
# Changes of one reminder that may get in first before a change gives up (409).
SUPERSEDE_TRIES = 8


def reminder_busy(reminder_id: object) -> ConflictError:
    """A change of a reminder that other changes got in before ``SUPERSEDE_TRIES`` times."""
    return ConflictError(
        f"reminder {reminder_id!r} changed {SUPERSEDE_TRIES} times while this change was "
        "applied: try again"
    )


def parse_weekdays(spec: str | Collection[int] | None) -> list[int] | None:
    """``"mon,wed,fri"`` or ``[0, 2, 4]`` -> sorted list; None/"" means every day."""
    if spec is None or spec == "":
        return None
    if isinstance(spec, str):
        out = []
        for part in spec.lower().replace(" ", "").split(","):
            if part not in WEEKDAYS:
                raise InputError(f"unknown weekday {part!r} (use {','.join(WEEKDAYS)})")
            out.append(WEEKDAYS.index(part))
        return sorted(set(out))
    days = sorted(set(spec))
    for d in days:
        if not isinstance(d, int) or not 0 <= d <= 6:
            raise InputError(f"weekday {d!r} is outside 0..6 (0 = Monday)")
    return days


class Manager:
    """The management API behind ``tzpush users|reminders|tokens``."""

    def __init__(self, database: Database[Doc], planner: Planner, settings: Settings) -> None:
        self.db = database
        self.planner = planner
        self.settings = settings

    @property
    def now(self) -> dt.datetime:
        return self.planner.clock()

    # -- users -----------------------------------------------------------------------------
    def upsert_user(
        self,
        user_id: str,
        *,
        timezone: str | None = None,
        enabled: bool | None = None,
        categories: Mapping[str, bool] | None = None,
        quiet_hours: tuple[str, str] | bool | None = False,
        daily_cap: int | bool | None = False,
    ) -> Doc:
        """Create or change a user. ``quiet_hours``/``daily_cap``: False = leave, None = clear."""
        _check_id(user_id, "user id")
        existing = self.db[dbm.USERS].find_one({"_id": user_id})
        sets = self.user_sets(
            user_id,
            existing,
            timezone=timezone,
            enabled=enabled,
            categories=categories,
            quiet_hours=quiet_hours,
            daily_cap=daily_cap,
        )
        # update_one then find_one, not find_one_and_update: the server here reads the whole
        # collection for a find_one_and_update even by _id (0.65 s at 100k users).
        # Only a change with a zone may create the user: one of some settings of a user erased
        # since the read above would create a user without one.
        self.db[dbm.USERS].update_one(
            {"_id": user_id}, user_update(user_id, sets), upsert="timezone" in sets
        )
        user = self.db[dbm.USERS].find_one({"_id": user_id})
        if user is None:
            raise erased_meanwhile(user_id)
        # A new zone moves every occurrence: pending messages are re-planned under a new reminder
        # version. Other preference changes are rechecked at send time.
        if (
            existing is not None
            and timezone is not None
            and existing.get("timezone") != sets["timezone"]
        ):
            why = f"user time zone changed to {sets['timezone']}"
            written: dict[str, int] = {}
            for r in self.db[dbm.REMINDERS].find({"userId": user_id, "isDeleted": False}):
                # The zone is written: a reminder that cannot be moved now must not stop the
                # others (a resend finds the zone unchanged and moves none). One erased since
                # has nothing to move; one other changes kept changing cancelled the old
                # version at the stored zone's instants each time (``_zones``), and the
                # consumer cancels what is left at send ("reminder changed").
                try:
                    replaced = self.supersede_current(r, existing, why)
                    written[str(r["_id"])] = next_version(replaced)
                except (NotFoundError, ConflictError) as exc:
                    log.warning("reminder %s not moved to the new zone: %s", r["_id"], exc)
            record_changes(self.db, [user_id], self.now)
            self.planner.plan_users([user_id])
            self.settle(user_id, written)
            return user
        record_changes(self.db, [user_id], self.now)
        self.planner.plan_users([user_id])
        return user

    def user_sets(
        self,
        user_id: str,
        existing: Doc | None,
        *,
        timezone: str | None = None,
        enabled: bool | None = None,
        categories: Mapping[str, bool] | None = None,
        quiet_hours: tuple[str, str] | bool | None = False,
        daily_cap: int | bool | None = False,
    ) -> Doc:
        """The ``$set`` of a user change, every value checked (``InputError`` names the bad one)."""
        if existing is None and timezone is None:
            raise InputError(f"user {user_id!r} does not exist yet: --timezone is required")
        sets: dict[str, Any] = {"updatedAt": self.now}
        if timezone is not None:
            sets["timezone"] = validate_timezone(timezone)
        if enabled is not None:
            sets["prefs.enabled"] = enabled
        for cat, on in (categories or {}).items():
            self._check_category(cat)
            sets[f"prefs.categories.{cat}"] = bool(on)
        if quiet_hours is None:
            sets["prefs.quietHours"] = None
        elif quiet_hours is not False:
            assert isinstance(quiet_hours, tuple)
            start, end = (parse_hhmm(x).strftime("%H:%M") for x in quiet_hours)
            sets["prefs.quietHours"] = [start, end]
        if daily_cap is None:
            sets["dailyCap"] = None
        elif daily_cap is not False:
            sets["dailyCap"] = validate_daily_cap(daily_cap)
        return sets

    def get_user(self, user_id: str) -> Doc:
        return self._get(dbm.USERS, user_id, "user")

    # -- reminders -------------------------------------------------------------------------
    def add_reminder(
        self,
        user_id: str,
        *,
        category: str,
        label: str,
        at: str,
        offset_minutes: int = 0,
        weekdays: str | Collection[int] | None = None,
        title: str | None = None,
        body: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> Doc:
        """Add a reminder and plan it; returns the stored document (its ``_id`` is the new id)."""
        user = self.get_user(user_id)
        fields = self.reminder_fields(
            category, label, at, offset_minutes, weekdays, title, body, data
        )
        doc = new_reminder(user_id, uuid.uuid4().hex[:16], fields, self.now)
        self.db[dbm.REMINDERS].insert_one(doc)
        record_changes(self.db, [user_id], self.now)
        report = self.planner.plan_users([user_id], reminders=[doc["_id"]])
        if self.undo_if_erased(
            report, read=erasure.incarnations_of({user_id: user}), reminders={user_id: [doc["_id"]]}
        ):
            raise erased_meanwhile(user_id)
        return doc

    def list_reminders(self, user_id: str, *, include_deleted: bool = False) -> list[Doc]:
        flt: Doc = {"userId": _check_id(user_id, "user id")}
        if not include_deleted:
            flt["isDeleted"] = False
        return sorted(self.db[dbm.REMINDERS].find(flt), key=lambda r: (r["time"], r["label"]))

    def update_reminder(self, reminder_id: str, **changes: Any) -> Doc:
        """Change a reminder: the old version's pending messages are cancelled, new ones planned.

        Only the fields given change: the others are those of the version replaced, read again
        if another change got in first (``supersede_current``)."""
        old = self._get_reminder(reminder_id)
        active = changes.pop("active", None)
        unknown = set(changes) - MERGED
        if unknown:
            raise InputError(f"unknown reminder field(s): {', '.join(sorted(unknown))}")

        def fields_of(old: Doc) -> Doc:
            merged = stored_content(old)
            del merged["active"]
            merged.update({k: v for k, v in changes.items() if v is not None or k == "weekdays"})
            fields = self.reminder_fields(**merged)
            if active is not None:
                fields["active"] = bool(active)
            return fields

        fields_of(old)  # a bad value is refused before anything is written
        user = self.get_user(old["userId"])
        replaced = self.supersede_current(old, user, "reminder changed", fields_of)
        record_changes(self.db, [old["userId"]], self.now)
        self.planner.plan_users([old["userId"]], reminders=[reminder_id])
        self.settle(old["userId"], {reminder_id: next_version(replaced)})
        return self._get_reminder(reminder_id)

    def remove_reminder(self, reminder_id: str) -> Doc:
        old = self._get_reminder(reminder_id)
        user = self.db[dbm.USERS].find_one({"_id": old["userId"]}) or {"timezone": "UTC"}
        gone = {"isDeleted": True, "active": False}
        self.supersede_current(old, user, "reminder removed", lambda _: gone)
        record_changes(self.db, [old["userId"]], self.now)
        return self._get_reminder(reminder_id)

    # -- tokens ----------------------------------------------------------------------------
    def register_token(
        self, user_id: str, *, device: str, token: str, max_attempts: int = 8, born: Any = UNREAD
    ) -> Doc:
        """A login: the one active registration of this device id and of this token string.

        Any other active registration of the device or of the token string (another user on the
        same install, the same install under another device id) is deactivated first, "token
        replaced", and its user is stamped in the change log, so a consumer cancels that user's
        pending messages for the install instead of pushing them to whoever holds it now.
        Concurrent logins race on the partial unique indexes; the loser retries with
        exponential back-off and jitter until exactly one active registration remains.
        ``born``: the user's ``createdAt`` as the caller read it first (a batch); another user
        found under the id now (erased and created again since) is a 404.
        """
        token = validate_expo_token(token)
        _check_id(device, "device id")
        _check_id(user_id, "user id")
        user = self.get_user(user_id)
        check_same_user(user, born)
        rng = random.Random()
        for attempt in range(max_attempts):
            now = self.now
            current = tokens.active_for(self.db, device, token)
            mine = [t for t in current if tokens.same_login(t, user_id, device, token)]
            others = [t["_id"] for t in current if t not in mine]
            if others:
                reason = f"{tokens.TOKEN_REPLACED} by a new login on the install"
                tokens.deactivate(self.db, {"_id": {"$in": others}}, reason, now)
            if mine:
                # Planned again (idempotent): a login an outage cut before its planning is sent
                # again by the backend, and this is its only chance before the next window.
                self.planner.plan_users([user_id], tokens=[mine[0]["_id"]])
                return mine[0]
            doc = tokens.new_registration(user_id, device, token, now)
            try:
                self.db[dbm.TOKENS].insert_one(doc)
            except DuplicateKeyError:
                time.sleep(compute_backoff(attempt + 1, base=0.05, cap=1.0, rng=rng))
                continue
            record_changes(self.db, [user_id], now)
            report = self.planner.plan_users([user_id], tokens=[doc["_id"]])
            if self.undo_if_erased(
                report,
                read=erasure.incarnations_of({user_id: user}),
                registrations={user_id: [doc["_id"]]},
            ):
                raise erased_meanwhile(user_id)
            return doc
        raise TransientError(
            f"could not register a token for device {device!r} after {max_attempts} attempts "
            "(concurrent logins kept winning); try again"
        )

    def unregister_token(self, *, token: str | None = None, device: str | None = None) -> int:
        flt: Doc = {}
        if token:
            flt["token"] = token.strip()
        if device:
            flt["deviceId"] = _check_id(device, "device id")
        if not flt:
            raise InputError("give --token or --device")
        return len(tokens.deactivate(self.db, flt, "unregistered", self.now))

    def list_tokens(self, user_id: str) -> list[Doc]:
        flt = {"userId": _check_id(user_id, "user id")}
        return list(self.db[dbm.TOKENS].find(flt).sort("createdAt", 1))

    # -- internals -------------------------------------------------------------------------
    def _check_category(self, category: str) -> None:
        problem = category_problem(category, self.settings.categories)
        if problem is not None:
            raise InputError(problem)

    def reminder_fields(
        self,
        category: str,
        label: str,
        at: str,
        offset_minutes: int,
        weekdays: str | Collection[int] | None,
        title: str | None,
        body: str | None,
        data: Mapping[str, Any] | None,
    ) -> Doc:
        self._check_category(category)
        validate_label(label)
        t = parse_hhmm(at)
        if not isinstance(offset_minutes, int) or not -1440 <= offset_minutes <= 1440:
            raise InputError(f"offset {offset_minutes!r} minutes is outside -1440..1440")
        validate_payload(title, body, dict(data) if data is not None else None)
        return {
            "category": category,
            "label": label,
            "time": t.strftime("%H:%M"),
            "offsetMinutes": offset_minutes,
            "weekdays": parse_weekdays(weekdays),
            "title": title,
            "body": body,
            "data": dict(data) if data is not None else None,
        }

    def _get_reminder(self, reminder_id: str) -> Doc:
        return self._get(dbm.REMINDERS, reminder_id, "reminder")

    def _get(self, collection: str, doc_id: str, what: str) -> Doc:
        _check_id(doc_id, f"{what} id")
        doc = self.db[collection].find_one({"_id": doc_id})
        if doc is None:
            raise NotFoundError(f"no {what} {doc_id!r}")
        return doc

    def supersede(
        self, old: Doc, user: Mapping[str, Any], reason: str, extra: Doc | None = None
    ) -> bool:
        """Bump the reminder's version and cancel its pending messages at the old instants;
        False, having changed nothing, when the reminder is no longer the version ``old`` is:
        the caller reads it again and starts over (``supersede_current``).

        The change log is stamped first (the callers stamp it again once the change is whole,
        for the consumers): a pass that read the old version and inserts it after this cancel
        finds the user there when it looks after its insert, and replaces what it inserted
        (``Planner._replan_changed``).

        Only the version read is replaced: two changes at once that both replaced whatever
        was there lost one of them, and the occurrence. The second wrote its whole content
        over the first's, and cancelled only the version it had read; the first's new message
        kept the occurrence's slot, the unique index refused the second's, and the consumer
        cancelled the first's at send ("reminder changed")."""
        now = self.now
        record_changes(self.db, [old["userId"]], now)
        if reminders.compare_and_set(self.db, old, extra or {}, now) is None:
            log.info("reminder %s changed meanwhile: read again", old["_id"])
            return False
        # Up to the end of a window in progress too: a pass that died (or is running) before its
        # watermark moved may have inserted the old version's messages beyond the watermark.
        until = watermarks(
            self.db, [old["userId"]], self.settings.creator.partitions, reach=True
        ).get(old["userId"])
        if until is None:
            return True
        max_grace = self._max_grace()
        instants = sorted(
            {
                o.at
                for zone in self._zones(user, old["userId"])
                for o in occurrences_between(
                    parse_hhmm(old["time"]),
                    zone,
                    now - dt.timedelta(seconds=max_grace),
                    until + dt.timedelta(seconds=1),
                    offset_minutes=int(old.get("offsetMinutes") or 0),
                    weekdays=old.get("weekdays"),
                )
            }
        )
        if not instants:
            return True
        # Only versions up to the one replaced: a pass that saw this change (after the bump) may
        # already have planned the new version at these instants (``Planner._replan_changed``).
        n = reminders.cancel_at(
            self.db, old["_id"], int(old.get("version", 1)), instants, reason, now
        )
        log.info("reminder %s: %s; %d pending cancelled", old["_id"], reason, n)
        return True

    def settle(self, user_id: str, written: Mapping[str, int]) -> None:
        """After a change wrote these reminder versions and planned them: for each reminder
        stored at another version now (a later change got in), whatever is pending of an older
        version ends ``cancelled`` and the stored version is planned; again until the version
        planned is the one stored. Then exactly the stored version's occurrences are pending,
        whatever the order in which concurrent changes' plannings inserted."""
        want = dict(written)
        for _ in range(SUPERSEDE_TRIES):
            if not want:
                return
            moved = {
                rid: v for rid, v in reminders.versions(self.db, want).items() if v != want[rid]
            }
            if not moved:
                return
            now = self.now
            since = now - dt.timedelta(seconds=self._max_grace())
            for rid, version in sorted(moved.items()):
                n = reminders.cancel_versions_before(
                    self.db, user_id, rid, version, since, REMINDER_CHANGED, now
                )
                log.info("reminder %s changed meanwhile: %d pending of older versions", rid, n)
            self.planner.plan_users([user_id], reminders=sorted(moved))
            want = moved
        log.warning("reminders %s kept changing while this change was planned", sorted(want))

    def _max_grace(self) -> int:
        return max(c.grace_seconds for c in self.settings.categories.values())

    def undo_if_erased(
        self,
        report: PassReport | None,
        *,
        read: Mapping[str, Any],
        registrations: Mapping[str, Collection[str]] | None = None,
        reminders: Mapping[str, Collection[str]] | None = None,
        kept: Mapping[str, Collection[str]] | None = None,
    ) -> set[str]:
        """After a creation and its planning: the users of ``registrations`` / ``reminders``
        (registration and reminder ids just created, by user) erased since the creation read
        them (``read``: their ``createdAt`` then), whether or not a user was created again
        under the same id since. The erasure's own sweep ran before the insert and never saw
        what it wrote: an active registration with the erased person's token, a reminder with
        their text, that a user created again under the same id would inherit (their pushes
        sent to the old person's device). It is deleted here, what was planned from it is ended
        and anonymised as the erasure does, and the users are returned (for a 404). The
        planning looked up most of them after its own insert (``report``); only the others are
        read. ``kept``: registrations found, not created (a login sent again), planned again
        from the documents found; only a user the planning looked up (it inserted for them) is
        checked, and nothing of theirs is deleted: for a user erased since, only what that
        planning inserted for them is ended and anonymised (a new user's own are kept)."""
        regs, reminders, kept = registrations or {}, reminders or {}, kept or {}
        found: dict[str, Any] = dict(report.alive) if report is not None else {}
        erased = report.erased if report is not None else set()
        users = {u for u, ids in regs.items() if ids} | {u for u, ids in reminders.items() if ids}
        users |= {u for u, ids in kept.items() if ids and (u in found or u in erased)}
        if not users:
            return set()
        unknown = users - found.keys() - erased
        if unknown:
            found.update(erasure.incarnations(self.db, unknown))
        gone = (users & erased) | erasure.gone(users - erased, read, found)
        if not gone:
            return set()
        tids = sorted({str(t) for u in gone for t in regs.get(u, ())})
        rids = sorted({str(r) for u in gone for r in reminders.get(u, ())})
        if tids:
            # Turned off first, as an erasure does: the change log is stamped, so a consumer
            # rechecks whatever a planning that read them before this may still insert.
            mine = {"_id": {"$in": tids}, "userId": {"$in": sorted(gone)}}
            tokens.deactivate(self.db, mine, ERASED_MEANWHILE, self.now)
            self.db[dbm.TOKENS].delete_many(mine)
        if rids:
            self.db[dbm.REMINDERS].delete_many(
                {"_id": {"$in": rids}, "userId": {"$in": sorted(gone)}}
            )
        again = sorted(gone & found.keys())  # created again: what was planned from it is theirs
        held = sorted({str(t) for u in gone for t in kept.get(u, ())})
        ended = self._scrub_planned(again, tids + held, rids) if again else 0
        log.warning(
            "%d users erased while a change created %d registrations and %d reminders for "
            "them (%d created again meanwhile): deleted, %d messages planned from them ended",
            len(gone),
            len(tids),
            len(rids),
            len(again),
            ended,
        )
        return gone

    def _scrub_planned(self, users: list[str], tids: list[str], rids: list[str]) -> int:
        """Messages of ``users`` planned for these registrations or reminders (of an erased
        person, kept by a user created again under the same id): ended and anonymised as the
        erasure does (``erasure.scrub_ids``), one user at a time. Returns how many ended."""
        messages = self.db[dbm.MESSAGES]
        ids: dict[str, list[Any]] = {}
        for field_name, values in (("notificationTokenId", tids), ("reminderId", rids)):
            if not values:
                continue
            flt = {"userId": {"$in": users}, field_name: {"$in": values}}
            for d in messages.find(flt, {"userId": 1}):
                ids.setdefault(str(d["userId"]), []).append(d["_id"])
        ended = 0
        for uid in sorted(ids):
            n, _ = erasure.scrub_ids(self.db, sorted(set(ids[uid]), key=str), self.now)
            ended += n
        return ended

    def _zones(self, user: Mapping[str, Any], user_id: str) -> list[str]:
        """The zones whose instants a change cancels at: the one of ``user`` as the caller read
        it, and the one stored now. A zone change that got in after that read planned the
        version replaced at the new zone's instants; a message left there holds the slot the
        new version needs (the unique index refuses it) and the consumer cancels it at send."""
        zones = {str(user.get("timezone") or "UTC")}
        stored = self.db[dbm.USERS].find_one({"_id": user_id}, {"timezone": 1})
        if stored is not None and isinstance(stored.get("timezone"), str):
            zones.add(stored["timezone"])
        valid = []
        for zone in sorted(zones):
            try:
                valid.append(validate_timezone(zone))
            except InputError:  # written by hand: the consumer reports it; nothing to cancel at
                continue
        return valid

    def supersede_current(
        self,
        old: Doc,
        user: Mapping[str, Any],
        reason: str,
        extra_of: Callable[[Doc], Doc | None] = lambda _: None,
    ) -> Doc:
        """``supersede`` from ``old`` as read, with the content ``extra_of(old)``; while another
        change of the reminder gets in first, again from the reminder as it is then. Returns the
        version replaced. A ``ConflictError`` (409) after ``SUPERSEDE_TRIES`` lost races."""
        owner, born = old.get("userId"), old.get("createdAt")
        for _ in range(SUPERSEDE_TRIES):
            if self.supersede(old, user, reason, extra_of(old)):
                return old
            old = self._get_reminder(str(old["_id"]))
            # Erased since, and the id taken by another user or by the user created again.
            if old.get("userId") != owner or old.get("createdAt") != born:
                raise NotFoundError(
                    f"no reminder {old['_id']!r} of user {owner!r}: removed meanwhile"
                )
        raise reminder_busy(old["_id"])


def next_version(replaced: Mapping[str, Any]) -> int:
    """The version a change writes over the version ``replaced`` (1 when missing)."""
    return int(replaced.get("version", 1)) + 1


def user_update(user_id: str, sets: Doc) -> Doc:
    """The upsert of a user: the checked ``sets``, and what only a new user gets."""
    return {
        "$set": sets,
        "$setOnInsert": {"createdAt": sets["updatedAt"], "bucket": bucket_of(user_id)},
    }


def stored_content(old: Mapping[str, Any]) -> dict[str, Any]:
    """A stored reminder's content, keyed as ``Manager.reminder_fields`` takes it, and whether
    it is active: what a change merges its own fields into (the CLI's ``reminders update``, the
    API's PATCH). A field missing from a document written by hand is None, which
    ``reminder_fields`` refuses with a message naming it (not a ``KeyError``)."""
    return {
        "category": old.get("category"),
        "label": old.get("label"),
        "at": old.get("time"),
        "offset_minutes": old.get("offsetMinutes") or 0,
        "weekdays": old.get("weekdays"),
        "title": old.get("title"),
        "body": old.get("body"),
        "data": old.get("data"),
        "active": bool(old.get("active", True)),
    }


ERASED_MEANWHILE = "user erased while this login was applied"


def erased_meanwhile(user_id: str) -> NotFoundError:
    """The answer to a creation for a user erased while it was applied (nothing of it kept)."""
    return NotFoundError(
        f"no user {user_id!r}: erased while this change was applied (nothing of it was kept)"
    )


def check_same_user(user: Mapping[str, Any], born: Any) -> None:
    """``born``: the user's ``createdAt`` as a caller read it first (``UNREAD``: none given).
    Another user found under the id now, erased and created again since, is a 404."""
    if born is not UNREAD and not erasure.same_user(born, user.get("createdAt")):
        raise erased_meanwhile(str(user["_id"]))


def new_reminder(user_id: str, reminder_id: str, fields: Doc, now: dt.datetime) -> Doc:
    """A reminder document as first stored (``fields`` from ``Manager.reminder_fields``)."""
    return {
        "active": True,
        **fields,
        "_id": reminder_id,
        "userId": user_id,
        "bucket": bucket_of(user_id),  # the planner reads a range of buckets at a time
        "isDeleted": False,
        "version": 1,
        "createdAt": now,
        "updatedAt": now,
    }


def _check_id(value: str, what: str) -> str:
    """An id as it enters: printable, no spaces, at most 128 characters (one line if not)."""
    return validate_id(value, what)


__all__ = ["Manager", "parse_weekdays", "record_changes"]
