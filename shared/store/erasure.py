"""What erasing a user does to their messages, and the look for users erased while a planning
held their documents: the rules, over the answers of the ``ErasureStore``
(``shared.store.abc_accounts``).

``ErasureStore.scrub`` is the erasure's sweep of the messages (``creator.accounts.erase_user``):
pending and missed ones end ``cancelled`` "user erased" (``ERASED``), and every message of the
user is anonymised (``anonymous``). A planning that read a user before their erasure inserts
afterwards what it planned from them, out of that sweep's reach. The planning looks after its
insert for users gone meanwhile (``ErasureStore.incarnations`` judged by ``gone``: gone, or
another user under the same id, created since the planning read the first; a pass only among the
users its change log shows changed since it began) and ends what it inserted for them
(``ErasureStore.scrub_ids``): the erasure deletes the user before its sweep, the planning
inserts before its look, so one of the two sees the other. A pass that died before its look
leaves it to the pass planning its window again, which sweeps every user of those partitions
erased since (``scrub(planned_before=...)``) (``creator.repairs.Repairs.drop_erased``,
``sweep_dead_window``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from shared.domain.messages import Doc

ERASED = "user erased"
SCRUBBED = ("title", "body", "data", "label", "token", "timezone")


def anonymous(now: dt.datetime) -> tuple[str, Doc]:
    """A new pseudonym (``erased-`` and 16 random hex digits: one per sweep, unlinkable) and the
    fields that anonymise a message with it (``SCRUBBED`` cleared, ``erasedAt`` = ``now``)."""
    pseudonym = "erased-" + uuid.uuid4().hex[:16]
    return pseudonym, {**dict.fromkeys(SCRUBBED, None), "userId": pseudonym, "erasedAt": now}


def same_user(read: Any, found: Any) -> bool:
    """Whether a user's ``createdAt`` as a change read (or wrote) it and as found later are the
    same user's: the database keeps milliseconds, a document written from Python holds
    microseconds; a naive instant is UTC."""
    if isinstance(read, dt.datetime) and isinstance(found, dt.datetime):
        return _ms(read) == _ms(found)
    return bool(read == found)


def _ms(at: dt.datetime) -> dt.datetime:
    at = at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)
    return at.astimezone(dt.UTC).replace(microsecond=at.microsecond // 1000 * 1000)


def incarnations_of(users: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The ``createdAt`` of user documents as a change or a planning read them: which user each
    id held then (``gone`` compares it with ``ErasureStore.incarnations`` after an insert)."""
    return {u: d.get("createdAt") for u, d in users.items()}


def gone(users: Collection[str], read: Mapping[str, Any], found: Mapping[str, Any]) -> set[str]:
    """Of ``users``: those not ``found`` now, or found as another user than ``read`` (erased and
    created again under the same id since; ``same_user``). A user ``read`` does not hold is
    judged by presence alone."""
    return {u for u in users if u not in found or (u in read and not same_user(read[u], found[u]))}
