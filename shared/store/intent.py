"""Reading and reserving what the intent check needs: the change log, current documents, caps.

The consumer trusts a wake-up's snapshot unless the user is in the intent-change log since the
wake-up was planned (one index range, usually empty); then it loads the user's current
documents here and judges them with ``shared.domain.intent``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping

from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store.abc import CapCounters, CurrentIntent, IntentLog, TokenStore
from shared.store.abc_registrations import ChangeStore
from shared.store.mongo.intent import MongoCapCounters, MongoCurrentIntent
from shared.store.mongo.tokens import MongoTokens
from shared.wire import Item

# Clocks of creators and management processes may differ a little from ours.
CHANGE_SKEW = dt.timedelta(seconds=30)

Current = tuple[dict[str, Doc], dict[str, Doc], dict[str, Doc]]


def changed_in(log: IntentLog, since: dt.datetime) -> set[str]:
    """Users whose intent changed at or after ``since``, allowing for ``CHANGE_SKEW``; an
    entry whose id is not a string (written by hand: no user has one) is left out."""
    return log.changed_since(since - CHANGE_SKEW)


def current_of(current: CurrentIntent, tokens: TokenStore, items: list[Item]) -> Current:
    """Users, reminders and tokens of these (few) items, by id."""
    return (
        current.users({i.user for i in items}),
        current.reminders({i.reminder for i in items}),
        tokens.by_ids({i.token_id for i in items}),
    )


def reserve_caps(
    counters: CapCounters, items: list[Item], caps: Mapping[str, int | None]
) -> dict[str, str]:
    """Reserve the daily cap for capped users; return the ids that are over it, with reasons.

    The counter is incremented for what will be sent (a reservation), so two batches for the
    same user cannot both pass; failed sends give their reservation back (see the recorder).
    """
    out: dict[str, str] = {}
    by_key: dict[str, list[Item]] = {}
    for it in items:
        if caps.get(it.id):
            by_key.setdefault(cap_key(it.user, it.local_date), []).append(it)
    for key, its in by_key.items():
        cap = int(caps[its[0].id] or 0)
        allowed = _reserve(counters, key, its[0].user, cap, len(its))
        for it in its[allowed:]:
            out[it.id] = f"daily cap of {cap} reached for {it.local_date}"
    return out


def cap_key(user_id: str, local_date: str) -> str:
    """The ``_id`` of a user's daily-cap counter for one local date."""
    return f"{user_id}:{local_date}"


def _reserve(counters: CapCounters, key: str, user_id: str, cap: int, n: int) -> int:
    """Take up to ``n`` of the room left under ``cap`` on the counter ``key``; how many it took.

    Each try is one conditional increment: it takes ``want`` only if that much room is left,
    so no interleaving of consumers ever reserves past the cap. The counter carries its user
    (an erasure deletes by it) and when it was made (it expires 8 days later: a local date
    lasts at most 50 h; late refunds come within minutes)."""
    want = min(n, cap)
    for _ in range(RESERVE_TRIES):
        if want <= 0:
            break
        if counters.reserve(key, user_id, want, cap, dt.datetime.now(dt.UTC)):
            return want
        # The counter exists with less room than ``want``, or another consumer made it just
        # now: ask again with the room it has.
        want = min(want, cap - counters.count(key))
    return 0


# Each failed try saw another reservation land in between; past this many, the push is held
# back as over the cap rather than waiting on a counter that busy.
RESERVE_TRIES = 8


def erased_in(changes: ChangeStore, user_ids: Collection[str], since: dt.datetime) -> set[str]:
    """Which of these users (from ``changed_in``) were erased at or after ``since``, allowing
    for ``CHANGE_SKEW``, whether or not they exist again (a user created again under the same
    id)."""
    return changes.erased_since(user_ids, since - CHANGE_SKEW)


# -- the same on MongoDB, by the names and signatures callers outside the consumer use -----------
def load_current(database: Database[Doc], items: list[Item]) -> Current:
    """``current_of`` on MongoDB."""
    return current_of(MongoCurrentIntent(database), MongoTokens(database), items)


def daily_cap_reasons(
    database: Database[Doc], items: list[Item], caps: Mapping[str, int | None]
) -> dict[str, str]:
    """``reserve_caps`` on MongoDB."""
    return reserve_caps(MongoCapCounters(database), items, caps)
