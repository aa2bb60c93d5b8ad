"""The console's Users list: users in id order, a page at a time, optionally those whose id
starts with what was searched.

Pages follow the API's rules (``api.pages``): a page is ``limit`` users (1 to 200) after the
cursor ``after``, which holds the last id shown; a cursor this list did not give out is refused
(422, naming ``after``). The prefix is read as a range of ``_id`` (``[prefix, next prefix)``),
which the primary index serves: no scan, whatever the number of users.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pymongo.database import Database

from api import pages
from shared.domain.messages import Doc
from shared.instants import as_time
from shared.store.mongo import reads

KIND = "console-users"


@dataclass
class UserRow:
    id: str
    timezone: str
    enabled: bool
    daily_cap: int | None
    created_at: dt.datetime | None


@dataclass
class UserPage:
    rows: list[UserRow]
    cursor: str | None  # the next page's ``after``; None on the last page


def _after_prefix(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix``; None if there is
    none (the prefix is empty or ends with the highest code point)."""
    head = prefix.rstrip("\U0010ffff")
    return head[:-1] + chr(ord(head[-1]) + 1) if head else None


def _row(doc: Doc) -> UserRow:
    prefs = doc.get("prefs")
    enabled = prefs.get("enabled", True) if isinstance(prefs, dict) else True
    cap = doc.get("dailyCap")
    return UserRow(
        id=str(doc["_id"]),
        timezone=doc["timezone"] if isinstance(doc.get("timezone"), str) else "",
        enabled=enabled is not False,
        daily_cap=cap if isinstance(cap, int) and not isinstance(cap, bool) else None,
        created_at=as_time(doc.get("createdAt")),
    )


def user_page(database: Database[Doc], prefix: str, after: str | None, limit: int) -> UserPage:
    """The ``limit`` users after the cursor ``after`` (in id order) whose id starts with
    ``prefix``, and the next page's cursor. Raises ``api.problems.ApiProblem`` (422) for a
    cursor this list did not give out."""
    key = pages.decode(after, KIND, (str,))
    lowest, inclusive = prefix, True
    if key is not None and key[0] >= prefix:
        lowest, inclusive = key[0], False
    upper = _after_prefix(prefix)
    docs = reads.users_by_id(database, lowest, inclusive=inclusive, below=upper, limit=limit + 1)
    more = len(docs) > limit
    docs = docs[:limit]
    cursor = pages.encode(KIND, [str(docs[-1]["_id"])]) if more else None
    return UserPage(rows=[_row(d) for d in docs], cursor=cursor)
