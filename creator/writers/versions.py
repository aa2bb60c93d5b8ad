"""Reminder versions: every change of a reminder is a compare-and-set on the version it read,
the old version's pending messages end, and after its planning a change settles the reminder
so exactly the stored version's occurrences are pending (``ReminderVersions.settle``)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any

from creator.writers.base import Context
from shared.domain.intent import REMINDER_CHANGED
from shared.domain.localtime import occurrences_between, parse_hhmm, validate_timezone
from shared.domain.messages import Doc
from shared.errors import ConflictError, InputError, NotFoundError
from shared.store.abc_accounts import StaleVersions, VersionCancel

log = logging.getLogger(__name__)

# Changes of one reminder that may get in first before a change gives up (409).
SUPERSEDE_TRIES = 8


def reminder_busy(reminder_id: object) -> ConflictError:
    """A change of a reminder that other changes got in before ``SUPERSEDE_TRIES`` times."""
    return ConflictError(
        f"reminder {reminder_id!r} changed {SUPERSEDE_TRIES} times while this change was "
        "applied: try again"
    )


def next_version(replaced: Mapping[str, Any]) -> int:
    """The version a change writes over the version ``replaced`` (1 when missing)."""
    return int(replaced.get("version", 1)) + 1


class ReminderVersions:
    """Replacing a reminder's version, and settling what is pending after a change."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def supersede(
        self, old: Doc, user: Mapping[str, Any], reason: str, extra: Doc | None = None
    ) -> bool:
        """Bump the reminder's version (writing ``extra``) and cancel its pending messages at
        the old version's instants; False, having changed nothing, when the reminder is no
        longer the version ``old`` is (the caller reads it again: ``supersede_current``).

        The change log is stamped first, so a pass that read the old version and inserts it
        after this cancel finds the user there when it looks after its insert and replaces
        what it inserted. Only versions up to the one replaced are cancelled: a planning that
        saw this change may already have planned the new version at these instants."""
        ctx = self.ctx
        now = ctx.now
        ctx.stores.changes.record([old["userId"]], now)
        if ctx.stores.reminders.compare_and_set(old, extra or {}, now) is None:
            log.info("reminder %s changed meanwhile: read again", old["_id"])
            return False
        # Up to the end of a window in progress too: a pass that died (or is running) before its
        # watermark moved may have inserted the old version's messages beyond the watermark.
        until = ctx.stores.partitions.watermarks(
            [old["userId"]], ctx.settings.creator.partitions, reach=True
        ).get(old["userId"])
        if until is None:
            return True
        start = now - dt.timedelta(seconds=ctx.max_grace())
        instants = self._instants(old, self._zones(user, old["userId"]), start, until)
        if not instants:
            return True
        version = int(old.get("version", 1))
        cancel = VersionCancel(old["_id"], version, instants)
        n = ctx.stores.reminders.cancel_at([cancel], reason, now)
        log.info("reminder %s: %s; %d pending cancelled", old["_id"], reason, n)
        return True

    def supersede_all(
        self, olds: list[Doc], user: Mapping[str, Any], reason: str
    ) -> tuple[dict[tuple[str, str], int], list[Doc]]:
        """``supersede`` of many reminders of one user with no other field (a zone change), in
        a few writes whatever their number: one change-log stamp, one compare-and-set of all,
        one read back, one read of the watermark, one cancel of all. Returns the versions now
        stored by (user, reminder) for those moved past the version read (by this change or
        one that got in first: either way the version read is over, and its pending messages
        at ``user``'s instants end), and the reminders left as read (erased and created again,
        or their version not where it was read), for the caller's one-at-a-time path."""
        if not olds:
            return {}, []
        ctx = self.ctx
        now = ctx.now
        user_id = str(olds[0]["userId"])
        ctx.stores.changes.record([user_id], now)
        ctx.stores.reminders.compare_and_set_many(olds, now)
        stored = ctx.stores.reminders.stamps([o["_id"] for o in olds])
        moved: list[tuple[Doc, int]] = []
        left: list[Doc] = []
        for o in olds:
            version, born = stored.get(str(o["_id"]), (None, None))
            seen = int(o.get("version", 1))
            if version is not None and born == o.get("createdAt") and version > seen:
                moved.append((o, version))
            else:
                left.append(o)
        until = ctx.stores.partitions.watermarks(
            [user_id], ctx.settings.creator.partitions, reach=True
        ).get(user_id)
        if until is not None and moved:
            zones = self._zones(user, user_id)
            start = now - dt.timedelta(seconds=ctx.max_grace())
            cancels = [
                VersionCancel(
                    str(o["_id"]), int(o.get("version", 1)), self._instants(o, zones, start, until)
                )
                for o, _ in moved
            ]
            n = ctx.stores.reminders.cancel_at(cancels, reason, now)
            log.info(
                "user %s: %s; %d reminders, %d pending cancelled", user_id, reason, len(moved), n
            )
        return {(user_id, str(o["_id"])): v for o, v in moved}, left

    @staticmethod
    def _instants(
        old: Doc, zones: list[str], start: dt.datetime, until: dt.datetime
    ) -> list[dt.datetime]:
        """The instants of the reminder as ``old`` is, in each of ``zones``, from ``start`` to
        just past ``until`` (what a planning may have inserted)."""
        return sorted(
            {
                o.at
                for zone in zones
                for o in occurrences_between(
                    parse_hhmm(old["time"]),
                    zone,
                    start,
                    until + dt.timedelta(seconds=1),
                    offset_minutes=int(old.get("offsetMinutes") or 0),
                    weekdays=old.get("weekdays"),
                )
            }
        )

    def supersede_current(
        self,
        old: Doc,
        user: Mapping[str, Any],
        reason: str,
        extra_of: Callable[[Doc], Doc | None] = lambda _: None,
    ) -> Doc:
        """``supersede`` from ``old`` as read, with the content ``extra_of(old)``; while another
        change of the reminder gets in first, again from the reminder as it is then. Returns the
        version replaced. A ``ConflictError`` (409) after ``SUPERSEDE_TRIES`` lost races; a
        ``NotFoundError`` when the reminder was erased (or its id taken) meanwhile."""
        owner, born = old.get("userId"), old.get("createdAt")
        for _ in range(SUPERSEDE_TRIES):
            if self.supersede(old, user, reason, extra_of(old)):
                return old
            found = self.ctx.stores.reminders.get(str(old["_id"]))
            # Erased since, and the id taken by another user or by the user created again.
            if found is None:
                raise NotFoundError(f"no reminder {old['_id']!r}")
            old = found
            if old.get("userId") != owner or old.get("createdAt") != born:
                raise NotFoundError(
                    f"no reminder {old['_id']!r} of user {owner!r}: removed meanwhile"
                )
        raise reminder_busy(old["_id"])

    def settle(self, written: Mapping[tuple[str, str], int]) -> None:
        """After a change wrote these reminder versions (by user and reminder id) and planned
        them: for each reminder stored at another version now (a later change got in), whatever
        is pending of an older version ends ``cancelled`` and the stored version is planned;
        again until the version planned is the one stored. Then exactly the stored version's
        occurrences are pending, whatever the order in which concurrent changes' plannings
        inserted. One read when no other change got in."""
        ctx = self.ctx
        want = dict(written)
        for _ in range(SUPERSEDE_TRIES):
            if not want:
                return
            stamps = ctx.stores.reminders.stamps({rid for _, rid in want})
            stored = {rid: version for rid, (version, _) in stamps.items()}
            moved = {
                (uid, rid): stored[rid]
                for (uid, rid), v in want.items()
                if rid in stored and stored[rid] != v
            }
            if not moved:
                return
            now = ctx.now
            since = now - dt.timedelta(seconds=ctx.max_grace())
            for (uid, rid), version in sorted(moved.items()):
                stale = StaleVersions(uid, rid, version, since)
                n = ctx.stores.reminders.cancel_versions_before(stale, REMINDER_CHANGED, now)
                log.info("reminder %s changed meanwhile: %d pending of older versions", rid, n)
            users = sorted({uid for uid, _ in moved})
            ctx.planner.plan_users(users, reminders=sorted(rid for _, rid in moved))
            want = moved
        log.warning("reminders %s kept changing while this change was planned", sorted(want))

    def _zones(self, user: Mapping[str, Any], user_id: str) -> list[str]:
        """The zones whose instants a change cancels at: the one of ``user`` as the caller read
        it, and the one stored now (a zone change that got in after that read planned the
        version replaced at the new zone's instants)."""
        zones = {str(user.get("timezone") or "UTC")}
        stored = self.ctx.stores.users.get(user_id, ("timezone",))
        if stored is not None and isinstance(stored.get("timezone"), str):
            zones.add(stored["timezone"])
        valid = []
        for zone in sorted(zones):
            try:
                valid.append(validate_timezone(zone))
            except InputError:  # written by hand: the consumer reports it; nothing to cancel at
                continue
        return valid
