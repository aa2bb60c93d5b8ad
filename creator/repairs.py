"""The planner's repairs: what a planning inserted that a change made meanwhile has overtaken.

A planning reads documents, plans, then inserts; a change (a reminder replaced, a user erased, a
registration turned off) can fall in between. Each repair looks after the insert, so that the
change and the planning always see each other (``docs/notes/races.md`` tells which
ordering each one closes, next to the test that guards it):
- ``replan_changed``: messages of a reminder version replaced since: ended, the current
  version planned;
- ``drop_erased``: messages of a user erased since (or erased and created again): ended and
  anonymised as the erasure does;
- ``sweep_dead_window``: the same for what a pass that died left, plus its messages for users
  created again and for registrations turned off since.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from creator.context import PlanContext
from shared.domain import intent
from shared.domain.messages import Doc, Status
from shared.domain.plan import bucket_of, partition_of
from shared.store import erasure
from shared.store.abc import Ending
from shared.store.abc_planning import Window
from shared.store.intent import changed_in, erased_in

log = logging.getLogger("creator.planner")

LOOKUP = 1000  # users per read of a dead window's messages

Replan = Callable[[Sequence[str], Collection[str]], object]  # (users, reminder ids)


class Repairs:
    """The repairs, on the stores and clock of a ``PlanContext``."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx

    def replan_changed(
        self, docs: list[Doc], fresh: set[str], changed: set[str], replan: Replan
    ) -> set[str]:
        """Of ``docs``, those this insert wrote (``fresh``) for users of ``changed`` from a
        reminder version that is no longer current: ended ``cancelled`` with the consumer's
        reason (removed, paused, or changed), and ``replan(users, reminder ids)`` called for
        the reminders still active. Returns their ids (not to be armed). Call it before they
        are armed: no consumer holds them then."""
        mine = [d for d in docs if d["_id"] in fresh and d["userId"] in changed]
        if not mine:
            return set()
        ids = sorted({str(d["reminderId"]) for d in mine})
        current = self.ctx.stores.plans.reminder_versions(ids)
        stale = [d for d in mine if _replaced(d, current.get(d["reminderId"]))]
        if not stale:
            return set()
        now = self.ctx.clock()
        gone = {d["reminderId"]: intent.reminder_gone(current.get(d["reminderId"])) for d in stale}
        why = {rid: reason or intent.REMINDER_CHANGED for rid, reason in gone.items()}
        self.ctx.stores.pending.end(
            [Ending(d["_id"], Status.CANCELLED, why[d["reminderId"]], now) for d in stale]
        )
        alive = sorted({str(rid) for rid, why in gone.items() if why is None})
        if alive:
            users = sorted({str(d["userId"]) for d in stale if d["reminderId"] in alive})
            replan(users, alive)
        log.info("%d messages of replaced reminder versions ended and planned again", len(stale))
        return {d["_id"] for d in stale}

    def drop_erased(
        self,
        docs: list[Doc],
        fresh: set[str],
        *,
        among: set[str] | None = None,
        read: Mapping[str, Any] | None = None,
        seen: dict[str, Any] | None = None,
    ) -> set[str]:
        """The users of ``docs`` erased since the planning read them; returns their ids. What
        this insert wrote for them (``fresh`` ids, and only those: a user created again under
        the same id keeps their new messages) is ended and anonymised as the erasure does.

        ``among``: only these users are looked up (a pass: those its change log shows changed
        since it began), else all. ``read``: the users' ``createdAt`` as the planning read
        them; one found now with another is another person, and the planning's messages count
        as erased. ``seen``: filled with the users found and their ``createdAt``."""
        users = {d["userId"] for d in docs if d["_id"] in fresh}
        if among is not None:
            users &= among
        found = self.ctx.stores.erasure.incarnations(users)
        if seen is not None:
            seen.update(found)
        gone = erasure.gone(users, read or {}, found)
        for uid in sorted(gone):
            ids = [d["_id"] for d in docs if d["userId"] == uid and d["_id"] in fresh]
            ended, pseudonym = self.ctx.stores.erasure.scrub_ids(ids, self.ctx.clock())
            _log_swept(pseudonym, ended)
        return gone

    def sweep_dead_window(self, since: dt.datetime, ours: Collection[int], window: Window) -> None:
        """Repair what a pass that died (begun at ``since``) inserted in this pass's ``window``
        for users of partitions ``ours`` changed since, and planned before this pass began
        (``window.at``): for a user erased since, ended and anonymised (``ErasureStore.scrub``);
        for a user erased and created again, what belongs to registrations the erasure deleted
        (``_sweep_recreated``); for a registration turned off since, ended ``cancelled``
        (``_end_for_dead_registrations``)."""
        n, mine = self.ctx.settings.creator.partitions, set(ours)
        changed = changed_in(self.ctx.stores.changes, since)
        users = {u for u in changed if partition_of(bucket_of(u), n) in mine}
        gone = erasure.gone(users, {}, self.ctx.stores.erasure.incarnations(users))
        for uid in sorted(gone):
            ended, _, pseudonym = self.ctx.stores.erasure.scrub(
                uid, self.ctx.clock(), planned_before=window.at
            )
            _log_swept(pseudonym, ended)
        self._sweep_recreated(sorted(users - gone), since, window)
        self._end_for_dead_registrations(sorted(users - gone), window)

    def _sweep_recreated(self, users: list[str], since: dt.datetime, window: Window) -> None:
        """Of ``users`` (existing), those erased since ``since``: their messages in ``window``
        planned at or before ``window.at``, whatever their status, for registrations that no
        longer exist are ended (if pending or missed) and anonymised (``ErasureStore.scrub_ids``);
        those for registrations that exist are kept. ``LOOKUP`` users a read of the change log;
        the messages, then the registrations, read only for users erased since."""
        for i in range(0, len(users), LOOKUP):
            again = sorted(erased_in(self.ctx.stores.changes, users[i : i + LOOKUP], since))
            if not again:
                continue
            # The messages first, then the registrations: a login in between is a registration
            # that exists, and its messages are not among those read.
            found = self.ctx.stores.plans.planned_in_window(again, window)
            if not found:
                continue
            theirs = self.ctx.stores.plans.token_ids_of(again)
            stale: dict[str, list[str]] = defaultdict(list)
            for d in found:
                tid = d.get("notificationTokenId")
                if isinstance(tid, str | int) and tid not in theirs:
                    stale[str(d["userId"])].append(d["_id"])
            for ids in stale.values():
                ended, pseudonym = self.ctx.stores.erasure.scrub_ids(ids, self.ctx.clock())
                _log_swept(pseudonym, ended)

    def _end_for_dead_registrations(self, users: list[str], window: Window) -> None:
        """Pending messages of ``users`` due in ``window``, planned before ``window.at``, whose
        registration is no longer active: ended ``cancelled`` with the consumer's reason. A
        registration once deactivated stays so, so this loses nothing; a user who turned
        notifications off (undone under the same ids) is left to the consumer. ``LOOKUP`` users
        a read of their registrations turned off; their messages are read only for those."""
        for i in range(0, len(users), LOOKUP):
            off = self.ctx.stores.plans.inactive_tokens_of(users[i : i + LOOKUP])
            if not off:
                continue
            owners = sorted({str(t["userId"]) for t in off.values()})
            found = self.ctx.stores.plans.pending_for_tokens(owners, list(off), window)
            ends = []
            at = self.ctx.clock()
            for d in found:
                tid = d.get("notificationTokenId")
                if not isinstance(tid, str | int) or tid not in off:
                    continue  # written by hand: the consumer judges (and reports) it
                reason = intent.token_off(off[tid])
                ends.append(Ending(d["_id"], Status.CANCELLED, reason, at))
            if ends:
                self.ctx.stores.pending.end(ends)
                log.info(
                    "%d messages of a dead pass for registrations gone since: cancelled", len(ends)
                )


def _log_swept(pseudonym: str, ended: int) -> None:
    log.warning(
        "a user was erased while a planning held their documents: %d messages planned for "
        "them cancelled and anonymised",
        ended,
        extra={"user_id": pseudonym},
    )


def _replaced(message: Doc, reminder: Doc | None) -> bool:
    """Whether ``message`` was planned from a version of ``reminder`` that is no longer current
    (or from a reminder that is gone). A version is 1 when missing, as everywhere; a version
    that is not a number (written by hand) is left to the consumer's check."""
    if reminder is None:
        return True
    try:
        return int(reminder.get("version", 1)) != int(message.get("reminderVersion", 1))
    except (TypeError, ValueError):
        return False
