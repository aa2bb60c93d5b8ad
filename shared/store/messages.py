"""Writes that end a message: one shape for every terminal write, guarded by the status it leaves.

Each terminal write is a compare-and-set on the status the writer expects (``pending``, or
``replaying`` for a replay), so two writers can never both end the same message: the loser's
update matches nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pymongo import UpdateOne

from shared.domain.messages import Status
from shared.store.abc import Ending
from shared.store.mongo.messages import ending_op


def end(
    message_id: str,
    status: Status,
    reason: str,
    now: dt.datetime,
    *,
    expect: Status = Status.PENDING,
    **fields: Any,
) -> UpdateOne:
    """The write ending ``message_id`` with ``status`` and ``reason`` if it is still ``expect``."""
    return ending_op(Ending(message_id, status, reason, now, expect, fields))
