"""Planning a few users at once, after a management change: in memory, inserted, armed."""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from creator.context import PlanContext
from creator.inserts import Inserter
from creator.repairs import Repairs
from creator.report import PassReport
from creator.wakeups import WakeupPublisher
from shared.domain.messages import Doc
from shared.domain.plan import plan_checked
from shared.errors import TransientError
from shared.store import erasure
from shared.store.abc_planning import Window

log = logging.getLogger("creator.planner")


@dataclass
class Known:
    """Documents a caller holds, planned from without reading them back. Each map stands alone:
    a user in ``users`` is planned from that document; in ``tokens``, from those registrations
    (all of the user's active ones that the planning is for); in ``reminders``, from those
    reminders (all of the user's). A user missing from a map has that kind read.

    Hold only what nothing can change between its write and the planning (users a call has
    just created, ``creator.upserts``), or read the rest after your own write (a login holds
    the registration it has just written, and its user and reminders are read after it): a
    change made meanwhile then plans what it reads, and one of the two sees the other."""

    users: dict[str, Doc] = field(default_factory=dict)
    tokens: dict[str, list[Doc]] = field(default_factory=dict)
    reminders: dict[str, list[Doc]] = field(default_factory=dict)


class Narrowing(TypedDict, total=False):
    """What narrows a planning of users (``UserPlanner.plan``), each None or missing for all:
    ``tokens``, only these registrations; ``reminders``, only these reminders (ids); ``known``,
    the documents the caller holds (``Known``)."""

    tokens: Collection[str] | None
    reminders: Collection[str] | None
    known: Known | None


class UserPlanner:
    """Plans, inserts and arms the reminders of a few users."""

    def __init__(
        self,
        ctx: PlanContext,
        publisher: WakeupPublisher,
        inserter: Inserter,
        repairs: Repairs,
    ) -> None:
        self.ctx = ctx
        self.publisher = publisher
        self.inserter = inserter
        self.repairs = repairs

    def plan(self, user_ids: Sequence[str], **narrow: Unpack[Narrowing]) -> PassReport:
        """Plan these users' reminders for ``[now, end)``, ``end`` the watermark of the user's
        partition, or the end of its window in progress when that is later (a pass still
        running read the old documents; one that died left them unplanned). A user whose
        partition is planned by no pass yet is left to the first pass.

        ``tokens`` / ``reminders``: only these registrations / reminders (ids) are planned, for
        a change that adds nothing else: what the user's other devices and reminders already
        have is neither inserted nor armed again. ``known``: users planned from the documents
        given, not read (``Known``). Returns the report, with the users found and erased
        after the insert (``alive``, ``erased``)."""
        tokens, reminders = narrow.get("tokens"), narrow.get("reminders")
        known = narrow.get("known")
        report = PassReport()
        now = self.ctx.clock()
        marks = self.ctx.stores.partitions.watermarks(
            user_ids, self.ctx.settings.creator.partitions, reach=True
        )
        by_end: dict[dt.datetime, list[str]] = defaultdict(list)
        for uid, end in marks.items():
            if end is not None and end > now:
                by_end[end].append(uid)
        only = set(reminders) if reminders is not None else None
        for end, uids in sorted(by_end.items()):
            held = [u for u in uids if known is not None and u in known.reminders]
            read = sorted(set(uids) - set(held))
            docs: list[Doc] = self.ctx.stores.plans.active_reminders_of(read) if read else []
            if known is not None:
                docs += [
                    r
                    for u in held
                    for r in known.reminders.get(u, [])
                    if r.get("active", True) and not r.get("isDeleted")
                ]
            docs = [r for r in docs if only is None or r["_id"] in only]
            self._plan_and_arm(
                docs,
                now,
                end,
                now,
                report,
                tokens=set(tokens) if tokens is not None else None,
                known=known,
            )
            report.window_start = now
            report.window_end = max(end, report.window_end or end)
        return report

    def _plan_and_arm(
        self,
        reminders: list[Doc],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        report: PassReport,
        *,
        tokens: set[str] | None = None,
        known: Known | None = None,
    ) -> None:
        """Plan, insert and arm ``reminders`` for ``[start, end)``; ``tokens``: for these
        registrations only."""
        report.reminders += len(reminders)
        if not reminders:
            return
        # Only ``plan_checked`` looks inside a reminder: here a missing or odd userId must not
        # raise (the reminder is reported as bad by plan_checked).
        user_ids = {u for r in reminders if isinstance(u := r.get("userId"), str)}
        held = known or Known()
        read_users = {u for u in user_ids if u not in held.users}
        read_tokens = {u for u in user_ids if u not in held.tokens}
        plans = self.ctx.stores.plans
        users = plans.users_by_id(read_users) if read_users else {}
        users.update({u: held.users[u] for u in user_ids - read_users})
        regs = list(plans.active_tokens_of(read_tokens).values()) if read_tokens else []
        regs += [t for u in user_ids - read_tokens for t in held.tokens[u] if t.get("isActive")]
        tokens_by_user: dict[str, list[Doc]] = defaultdict(list)
        for t in regs:
            if tokens is None or t["_id"] in tokens:
                tokens_by_user[t["userId"]].append(t)
        docs, skipped = plan_checked(
            reminders,
            users,
            tokens_by_user,
            start,
            end,
            now,
            categories=self.ctx.settings.categories,
        )
        report.add_skipped(skipped)
        report.planned += len(docs)
        docs.sort(key=lambda d: (d["category"], d["scheduledAt"], d["_id"]))
        fresh: set[str] = set()
        inserted = self.inserter.insert(docs, report, fresh) if docs else []
        if fresh:
            seen: dict[str, Any] = {}
            read = erasure.incarnations_of(users)
            gone = self.repairs.drop_erased(inserted, fresh, read=read, seen=seen)
            report.alive.update({u: at for u, at in seen.items() if u not in gone})
            report.erased |= gone
            if gone:
                inserted = [d for d in inserted if d["userId"] not in gone]
        try:
            armed = self.publisher.arm(inserted)
        except TransientError as exc:
            self._arm_later(inserted, start, end, now, exc, report)
            return
        report.wakeups += len(armed)

    def _arm_later(
        self,
        inserted: list[Doc],
        start: dt.datetime,
        end: dt.datetime,
        now: dt.datetime,
        exc: TransientError,
        report: PassReport,
    ) -> None:
        """The broker could not take the wake-ups: the messages stay in the database, and their
        users' partitions are marked to be planned again (``PartitionStore.reopen``), so the next
        pass arms them as found. The change stands; a note in the log and the report says so."""
        if not inserted:
            return
        users = {d["userId"] for d in inserted}
        self.ctx.stores.partitions.reopen(
            users, self.ctx.settings.creator.partitions, Window(start, end, now)
        )
        note = (
            f"{len(inserted)} message(s) planned but not armed ({exc}): the next planning pass "
            "arms them"
        )
        log.warning("%s", note)
        report.notes.append(note)
