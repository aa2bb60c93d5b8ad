"""Erasure: a user erased on purpose, and the one check for a user erased while a change that
created something for them was applied (``undo_if_erased``)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from creator.planner import PassReport
from creator.writers.base import ERASED_MEANWHILE, Context
from shared.store import erasure, tokens

log = logging.getLogger(__name__)

ERASED = erasure.ERASED


@dataclass(frozen=True)
class Erased:
    cancelled: int
    tokens: int
    reminders: int
    history: int


class ErasureWriter:
    """Erasing users, and undoing what a change created for a user erased meanwhile."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def erase(self, user_id: str) -> Erased:
        """Erase a user: nothing more is sent to them, and nothing personal is left.

        In this order, so a consumer judging the user meanwhile finds them gone: stamp the
        change log (consumers recheck in full: "user no longer exists"), delete the user,
        deactivate then delete their device registrations, delete their reminders, end their
        pending and missed messages ``cancelled`` "user erased" (nothing pending stays, nothing
        missed can be replayed), delete their daily-cap counters and their Idempotency-Key
        records (stored answers with their texts). The change log keeps the bare user id with
        its erasure stamp for a week (``shared.store.db.ERASED_KEPT_S``), for what read the user
        before. Message history is kept for the figures (counts by status and category,
        lateness) but anonymised: the user id
        becomes a random ``erased-...`` id (one per erasure, unlinkable), and the push's text,
        data, label, token and zone are removed. A push that was already leaving for Expo at
        that instant may still arrive.
        """
        ctx = self.ctx
        ctx.get_user(user_id)
        now = ctx.now
        regs, changes = ctx.stores.registrations, ctx.stores.changes
        changes.record([user_id], now, erased=True)
        ctx.stores.users.delete(user_id)
        off = tokens.stamped(changes, regs.deactivate_of_user(user_id, ERASED, now), now)
        regs.delete_of_user(user_id)
        removed = ctx.stores.reminders.delete([user_id])
        cancelled, history, pseudonym = ctx.stores.erasure.scrub(user_id, now)
        changes.erase_counters(user_id)
        ctx.stores.erasure.forget_requests(user_id)
        log.info(
            "user erased: %d pending cancelled, %d tokens off, %d reminders, %d messages kept "
            "anonymised",
            cancelled,
            len(off),
            removed,
            history,
            extra={"user_id": pseudonym},
        )
        return Erased(cancelled, len(off), removed, history)

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
        (ids just created, by user) erased since the creation read them (``read``: their
        ``createdAt`` then), whether or not a user was created again under the same id since.
        What was created for them is deleted, what was planned from it ended and anonymised
        as the erasure does, and the users are returned (for a 404). The planning looked up
        most of them after its own insert (``report``); only the others are read. ``kept``:
        registrations found, not created (a login sent again); only a user the planning looked
        up is checked, nothing of theirs is deleted, and for a user created again only what
        that planning inserted for them is ended and anonymised."""
        regs, reminders, kept = registrations or {}, reminders or {}, kept or {}
        found: dict[str, Any] = dict(report.alive) if report is not None else {}
        erased = report.erased if report is not None else set()
        users = {u for u, ids in regs.items() if ids} | {u for u, ids in reminders.items() if ids}
        users |= {u for u, ids in kept.items() if ids and (u in found or u in erased)}
        if not users:
            return set()
        unknown = users - found.keys() - erased
        if unknown:
            found.update(self.ctx.stores.erasure.incarnations(unknown))
        gone = (users & erased) | erasure.gone(users - erased, read, found)
        if not gone:
            return set()
        tids = sorted({str(t) for u in gone for t in regs.get(u, ())})
        rids = sorted({str(r) for u in gone for r in reminders.get(u, ())})
        if tids:
            # Turned off first, as an erasure does: the change log is stamped, so a consumer
            # rechecks whatever a planning that read them before this may still insert.
            store, now = self.ctx.stores.registrations, self.ctx.now
            off = store.deactivate_ids_of(tids, gone, ERASED_MEANWHILE, now)
            tokens.stamped(self.ctx.stores.changes, off, now)
            store.delete_ids_of(tids, gone)
        if rids:
            self.ctx.stores.reminders.delete(gone, rids)
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
        erasure does (``ErasureStore.scrub_ids``), one user at a time. Returns how many ended."""
        store = self.ctx.stores.erasure
        ids: dict[str, list[Any]] = {}
        for field_name, values in (("notificationTokenId", tids), ("reminderId", rids)):
            if values:
                for uid, found in store.planned_from(users, field_name, values).items():
                    ids.setdefault(uid, []).extend(found)
        ended = 0
        for uid in sorted(ids):
            n, _ = store.scrub_ids(sorted(set(ids[uid]), key=str), self.ctx.now)
            ended += n
        return ended
