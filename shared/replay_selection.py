"""What a replay selects: ``is_missed`` messages, or those that ``failed`` for a project-level
cause, by due time, category, user and id; and settling replays that stopped first.

Selection reads ``is_missed`` messages through the partial index ``missed_by_time`` (a due-time
range; category, user and id filters ride on it). With ``status=failed`` it reads messages that
ended ``failed`` for a project-level cause instead (``Selection.causes``, names from
``shared.domain.outcomes.REPLAY_CAUSES``: ``credentials`` and ``expo-down``), by their
``errorCode`` or their receipt's error; never a failure a device caused, the message's own, or
one whose push Expo may already have taken (``OutcomeUnknown``): the failed messages of the range
through the partial index ``failed_by_time``, the cause judged here (``rules.says_a_cause``; the
replay store says why not in the query: ``shared.store.mongo.replays``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from shared.clock import Clock, utcnow
from shared.domain import replay as rules
from shared.domain.messages import Doc, Status
from shared.domain.outcomes import REPLAY_CAUSES, ErrorCode
from shared.errors import InputError
from shared.store import replays
from shared.store.mongo import ReplayWhere, replay_stores_of

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
FAR = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)
REPLAYABLE = (Status.IS_MISSED, Status.FAILED)


@dataclass
class Selection:
    """Which messages to replay: ``is_missed`` ones, or (``status=FAILED``) those that failed
    for one of ``causes`` (empty: every cause in ``REPLAY_CAUSES``); empty fields select
    everything."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    categories: Sequence[str] = ()
    users: Sequence[str] = ()
    ids: Sequence[str] = ()
    status: Status = Status.IS_MISSED
    causes: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.status not in REPLAYABLE:
            raise InputError(f"replay selects is_missed or failed messages, not {self.status}")
        if self.causes and self.status is not Status.FAILED:
            raise InputError("a cause selects failed messages: ask for status failed with it")
        bad = [c for c in self.causes if c not in REPLAY_CAUSES]
        if bad:
            raise InputError(
                f"unknown cause {', '.join(map(repr, bad))}: one of {', '.join(REPLAY_CAUSES)}"
            )

    def codes(self) -> list[ErrorCode]:
        """The failure codes a ``failed`` selection takes."""
        return sorted({c for name in self.causes or REPLAY_CAUSES for c in REPLAY_CAUSES[name]})

    def takes(self, doc: Doc) -> bool:
        """Whether a selected message says one of the causes (its code, or its receipt's);
        every ``is_missed`` one does. Judged here, not in the query (``query``)."""
        if self.status is not Status.FAILED:
            return True
        return rules.says_a_cause(doc, {c.value for c in self.codes()})

    def query(self) -> Doc:
        """What the replay store reads: the status, the due range, and the ids, categories
        and users asked for (the causes are judged by ``takes``)."""
        q: Doc = {"status": self.status.value}
        if self.ids:
            q["_id"] = {"$in": list(self.ids)}
        q["scheduledAt"] = {"$gte": self.since or EPOCH, "$lt": self.until or FAR}
        if self.categories:
            q["category"] = {"$in": list(self.categories)}
        if self.users:
            q["userId"] = {"$in": list(self.users)}
        return q


def unchanged(doc: Doc) -> Doc:
    """What a failed message must still say when a replay takes it: the code and the receipt it
    had when selected (so one that changed since is left)."""
    return {"errorCode": doc.get("errorCode"), "receipt": doc.get("receipt")}


def select(where: ReplayWhere, selection: Selection) -> list[Doc]:
    """The messages a selection names, oldest due first (``where``: a replay's stores, or a
    MongoDB database)."""
    found = replay_stores_of(where).replays.selected(selection.query())
    return sorted(
        (d for d in found if selection.takes(d)), key=lambda d: (d["scheduledAt"], d["_id"])
    )


def resume(where: ReplayWhere, by: str, clock: Clock = utcnow) -> replays.Settled:
    """Settle replays that stopped without settling (their lease ran out), before selecting:
    what they never sent is ``is_missed`` (or ``failed``) again, so this replay can select it."""
    return replays.settle_stale(replay_stores_of(where), clock(), f"replay by {by}")
