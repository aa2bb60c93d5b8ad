"""A replay's message writes on MongoDB, as ``shared.store.replays`` builds them (``back_to_missed``
and the like: each a compare-and-set on its own message)."""

from __future__ import annotations

from collections.abc import Sequence

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store import db as dbm


def write_updates(database: Database[Doc], updates: Sequence[UpdateOne]) -> None:
    """Apply ``updates`` to the messages, unordered: each stands alone (one whose message no
    longer matches changes nothing), so one failing leaves the others done. None: no write."""
    if updates:
        database[dbm.MESSAGES].bulk_write(list(updates), ordered=False)
