"""Seeded, reproducible workloads: users, tokens, reminders, and messages due at one instant.

Documents have the shapes the management API writes (creator/manage.py) and the planner writes
(creator/plan.py); they are bulk-inserted (seeding is not what is measured). Every id carries a
per-scenario prefix, so a scenario's data never collides with another's.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any
from zoneinfo import ZoneInfo

from pymongo.database import Database

from shared.domain.messages import new_message
from shared.domain.plan import bucket_of
from shared.store import db as dbm

Doc = dict[str, Any]
ZONES = [
    "Asia/Tashkent", "Europe/Berlin", "America/New_York", "Australia/Sydney", "UTC",
    "America/Los_Angeles", "Asia/Kolkata", "Asia/Tokyo", "Europe/London", "America/Sao_Paulo",
    "Asia/Kathmandu", "Pacific/Auckland",
]  # fmt: skip
CATEGORIES = ["medication", "meal", "mood", "activity"]
BATCH = 5000


def insert(database: Database[Doc], coll: str, docs: list[Doc]) -> None:
    for i in range(0, len(docs), BATCH):
        database[coll].insert_many(docs[i : i + BATCH], ordered=False)


def user_doc(uid: str, tz: str, now: dt.datetime) -> Doc:
    prefs = {"enabled": True, "categories": {}, "quietHours": None}
    return {
        "_id": uid,
        "bucket": bucket_of(uid),  # as the management code writes it (the planner reads by it)
        "timezone": tz,
        "prefs": prefs,
        "dailyCap": None,
        "createdAt": now,
    }


def token_doc(uid: str, now: dt.datetime) -> Doc:
    return {
        "_id": f"t-{uid}",
        "userId": uid,
        "bucket": bucket_of(uid),
        "deviceId": f"dev-{uid}",
        "token": f"ExponentPushToken[{uid}]",
        "isActive": True,
        "failureCount": 0,
        "createdAt": now,
        "updatedAt": now,
    }


def reminder_doc(rid: str, uid: str, category: str, hhmm: str, now: dt.datetime) -> Doc:
    return {
        "_id": rid,
        "userId": uid,
        "bucket": bucket_of(uid),
        "category": category,
        "label": f"{category}-{rid[-4:]}",
        "time": hhmm,
        "offsetMinutes": 0,
        "weekdays": None,
        "title": f"Time for your {category}",
        "body": "Tap to log it",
        "data": {"kind": category},
        "active": True,
        "isDeleted": False,
        "version": 1,
        "createdAt": now,
        "updatedAt": now,
    }


def population(
    n_users: int,
    per_user: int,
    seed: int,
    prefix: str,
    now: dt.datetime,
    gap: tuple[dt.datetime, dt.datetime] | None = None,
) -> tuple[list[Doc], list[Doc], list[Doc]]:
    """Users (zones round the world), one token each, ``per_user`` reminders at random local times.

    ``gap``: no occurrence falls in this UTC window (an idle stretch for the idle scenario).
    """
    rng = random.Random(seed)
    users, tokens, reminders = [], [], []
    for u in range(n_users):
        uid = f"{prefix}u{u:07d}"
        tz = rng.choice(ZONES)
        users.append(user_doc(uid, tz, now))
        tokens.append(token_doc(uid, now))
        for k in range(per_user):
            while True:
                minute = rng.randrange(1440)
                local = dt.datetime.combine(now.astimezone(ZoneInfo(tz)).date(), dt.time())
                local += dt.timedelta(minutes=minute)
                at = local.replace(tzinfo=ZoneInfo(tz)).astimezone(dt.UTC)
                if gap is None or not _in_daily_gap(at, gap):
                    break
            hhmm = f"{minute // 60:02d}:{minute % 60:02d}"
            cat = CATEGORIES[rng.randrange(len(CATEGORIES))]
            reminders.append(reminder_doc(f"{prefix}r{u:07d}{k}", uid, cat, hhmm, now))
    return users, tokens, reminders


def _in_daily_gap(at: dt.datetime, gap: tuple[dt.datetime, dt.datetime]) -> bool:
    """Whether the time of day of ``at`` (UTC) falls in the gap's time of day (1 min margin)."""
    day = 86400
    s = (gap[0] - dt.timedelta(minutes=1)).timestamp() % day
    e = (gap[1] + dt.timedelta(minutes=1)).timestamp() % day
    t = at.timestamp() % day
    return (s <= t < e) if s <= e else (t >= s or t < e)


def seed_population(
    database: Database[Doc], users: list[Doc], tokens: list[Doc], reminders: list[Doc]
) -> None:
    insert(database, dbm.USERS, users)
    insert(database, dbm.TOKENS, tokens)
    insert(database, dbm.REMINDERS, reminders)


def herd_people(
    database: Database[Doc], n: int, seed: int, prefix: str, category: str = "meal"
) -> list[tuple[Doc, Doc, Doc]]:
    """``n`` users with one token and one reminder each (inserted); the (user, token, reminder)."""
    now = dt.datetime.now(dt.UTC)
    rng = random.Random(seed)
    people = []
    for u in range(n):
        uid = f"{prefix}h{u:07d}"
        user = user_doc(uid, rng.choice(ZONES), now)
        rem = reminder_doc(f"{prefix}hr{u:07d}", uid, category, "03:33", now)
        people.append((user, token_doc(uid, now), rem))
    seed_population(
        database, [p[0] for p in people], [p[1] for p in people], [p[2] for p in people]
    )
    return people


def herd_messages(
    database: Database[Doc], people: list[tuple[Doc, Doc, Doc]], due: dt.datetime
) -> list[Doc]:
    """The pending messages a planning pass would have made for these people, all due at ``due``.

    Like tests/integration/harness.World.due_messages, in bulk; returns the documents for
    ``Planner.arm``.
    """
    now = dt.datetime.now(dt.UTC)
    msgs = []
    for user, tok, rem in people:
        tz = user["timezone"]
        local_date = due.astimezone(ZoneInfo(tz)).date()
        msgs.append(new_message(rem, user, tok, due, local_date, now))
    insert(database, dbm.MESSAGES, msgs)
    return msgs
