"""Taking over the guards of a consumer that stopped: send what certainly never left, end the rest.

Only a redelivered frame (its consumer lost its broker session: died, paused, disconnected) leads
here. The stopped holder's journaled outcomes are merged first (they are the truth); its attempt
records then say which messages may have left without an outcome: those end ``failed``, outcome
unknown, never resent. Everything else is moved to the new holder by compare-and-set on the
guard, so two consumers taking over at once cannot both win.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from shared.domain.messages import Status, outcome_unknown
from shared.store.abc import ConsumerStores, Ending
from shared.wire import Item


def take_over(
    stores: ConsumerStores,
    others: list[Item],
    owner: str,
    now: dt.datetime,
    wakeup: str,
    *,
    held_here: Callable[[str], bool],
    merge_journal_of: Callable[[str], object],
) -> set[str]:
    """The ids of ``others`` (guarded by someone else) that ``owner`` now holds."""
    guards = stores.guards
    got: set[str] = set()
    merged: dict[str, set[str]] = {}
    for it in others:
        if held_here(it.id):
            continue  # this consumer holds it in another live wake-up: that one sends it
        guard = guards.holder(it.id)
        if guard is None:  # released by its holder (shutdown or lost broker): take it
            got |= guards.take([it.id], owner, now, wakeup=wakeup)
            continue
        holder = guard.owner
        if holder == owner:
            # Another copy of this wake-up here took it, and sends it or has sent it (its
            # outcome may not be merged yet): never taken twice (docs/notes/races.md).
            continue
        if holder not in merged:
            # Fence first, then read: the holder can no longer start a request that the
            # attempt records read below would miss (shared/store/guards.py).
            guards.fence(holder, owner, now)
            merge_journal_of(holder)
            merged[holder] = guards.maybe_sent(holder)
        if stores.messages.statuses([it.id]).get(it.id) != Status.PENDING.value:
            continue  # ended meanwhile (its journaled outcome was just merged): not ours
        if it.id in merged[holder]:
            stores.messages.end([Ending(it.id, Status.FAILED, outcome_unknown(holder), now)])
            continue
        if guards.take_over(guard, owner, now, wakeup):
            got.add(it.id)
    return got
