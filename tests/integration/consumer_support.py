"""Helpers shared by the consumer and receipts integration tests (issue 5).

On top of ``harness.World``: fast bulk fixtures for herds (one ``insert_many`` per collection
instead of a management call per user), per-test category graces, predicates for
``wait_for``, and a consumer run as a real subprocess (for SIGKILL and SIGTERM drills).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from creator.planner import Planner
from shared.clock import utcnow
from shared.domain.messages import new_message
from shared.settings import CategorySettings, Settings
from shared.store import db as dbm
from tests.integration.harness import World, wait_for

Doc = dict[str, Any]
REPO_ROOT = Path(__file__).resolve().parents[2]


# -- time --------------------------------------------------------------------------------------
def in_seconds(seconds: float) -> dt.datetime:
    """An instant ``seconds`` from now, truncated to whole milliseconds (what MongoDB keeps)."""
    t = utcnow() + dt.timedelta(seconds=seconds)
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


# -- settings ----------------------------------------------------------------------------------
def set_graces(world: World, **graces: int) -> None:
    """Override the grace window of some categories for this world (consumers started later)."""
    cats = dict(world.settings.categories)
    for name, grace in graces.items():
        cats[name] = CategorySettings(grace_seconds=grace)
    world.settings = world.settings.model_copy(update={"categories": cats})


def set_creator(world: World, **changes: Any) -> None:
    world.settings = world.settings.model_copy(
        update={"creator": world.settings.creator.model_copy(update=changes)}
    )


def set_wakeup(world: World, **changes: Any) -> None:
    world.settings = world.settings.model_copy(
        update={"wakeup": world.settings.wakeup.model_copy(update=changes)}
    )


# -- data --------------------------------------------------------------------------------------
def herd(
    world: World,
    n: int,
    due: dt.datetime,
    *,
    prefix: str | None = None,
    category: str = "meal",
    label: str = "lunch",
    tz: str = "UTC",
) -> list[Doc]:
    """``n`` users, each with one active token, one reminder and one message due at ``due``.

    Everything is written with one ``insert_many`` per collection (what a planning pass would
    write); nothing is armed. Tokens are ``ExponentPushToken[<user id>]``.
    """
    prefix = prefix or f"h{uuid.uuid4().hex[:6]}"
    now = utcnow()
    local_date = due.astimezone(__import__("zoneinfo").ZoneInfo(tz)).date()
    users, tokens, reminders, messages = [], [], [], []
    for i in range(n):
        uid = f"{prefix}-{i:05d}"
        tid = f"tok-{uid}"
        rid = f"rem-{uid}"
        token = f"ExponentPushToken[{uid}]"
        users.append(
            {
                "_id": uid,
                "timezone": tz,
                "prefs": {"enabled": True, "categories": {}, "quietHours": None},
                "dailyCap": None,
                "createdAt": now,
                "updatedAt": now,
            }
        )
        tokens.append(
            {
                "_id": tid,
                "userId": uid,
                "deviceId": f"dev-{uid}",
                "token": token,
                "isActive": True,
                "failureCount": 0,
                "createdAt": now,
                "updatedAt": now,
            }
        )
        reminders.append(
            {
                "_id": rid,
                "userId": uid,
                "category": category,
                "label": label,
                "time": "03:33",
                "offsetMinutes": 0,
                "weekdays": None,
                "title": "Herd",
                "body": None,
                "data": None,
                "active": True,
                "isDeleted": False,
                "version": 1,
                "createdAt": now,
                "updatedAt": now,
            }
        )
        messages.append(new_message(reminders[-1], users[-1], tokens[-1], due, local_date, now))
    dbm.ensure_indexes(world.db)
    world.db[dbm.USERS].insert_many(users, ordered=False)
    world.db[dbm.TOKENS].insert_many(tokens, ordered=False)
    world.db[dbm.REMINDERS].insert_many(reminders, ordered=False)
    world.db[dbm.MESSAGES].insert_many(messages, ordered=False)
    return messages


def arm(world: World, docs: list[Doc], planner: Planner | None = None) -> None:
    (planner or world.planner()).arm(docs)


def ids_of(docs: list[Doc]) -> list[str]:
    return [d["_id"] for d in docs]


def token_of(world: World, uid: str) -> Doc:
    doc = world.db[dbm.TOKENS].find_one({"userId": uid, "isActive": True})
    assert doc is not None, f"{uid} has no active token"
    return doc


# -- predicates and reads ----------------------------------------------------------------------
def guarded(world: World, ids: list[str]) -> bool:
    """Every id has a send guard: some consumer took (prepared) them."""
    return world.db[dbm.SENDS].count_documents({"_id": {"$in": ids}}) == len(ids)


def status_counts(world: World) -> Counter[str]:
    """Messages by status (scan of this test's collection, dropped after each test)."""
    return Counter(d["status"] for d in world.db[dbm.MESSAGES].find({}, {"status": 1}))


def terminal(world: World, n: int) -> bool:
    """All ``n`` messages of this test are out of ``pending`` (one scan, no $in)."""
    c = status_counts(world)
    return sum(c.values()) == n and c.get("pending", 0) == 0


def pushes_by_message(world: World) -> Counter[str]:
    return Counter((p.get("data") or {}).get("messageId") for p in world.fake.pushes())


def pushes_by_token(world: World) -> Counter[str]:
    return Counter(p["to"] for p in world.fake.pushes())


# -- a consumer as a real process ------------------------------------------------------------
def consumer_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment that points ``tzpush consumer`` at this world's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TZPUSH_")}
    env.update(
        {
            "TZPUSH_MONGO__URI": settings.mongo.uri.get_secret_value(),
            "TZPUSH_MONGO__DATABASE": settings.mongo.database,
            "TZPUSH_STOMP__HOST": settings.stomp.host,
            "TZPUSH_STOMP__PORT": str(settings.stomp.port),
            "TZPUSH_STOMP__QUEUE_PREFIX": settings.stomp.queue_prefix,
            "TZPUSH_EXPO__BASE_URL": settings.expo.base_url,
            "TZPUSH_EXPO__RATE_PER_SECOND": str(settings.expo.rate_per_second),
            "TZPUSH_EXPO__CONCURRENCY": str(settings.expo.concurrency),
            "TZPUSH_EXPO__MAX_RETRIES": str(settings.expo.max_retries),
            "TZPUSH_WAKEUP__LEAD_SECONDS": str(settings.wakeup.lead_seconds),
            "TZPUSH_SHUTDOWN__TIMEOUT_S": str(settings.shutdown.timeout_s),
            "TZPUSH_OUTCOMES__RECEIPTS_DELAY_S": str(settings.outcomes.receipts_delay_s),
            "TZPUSH_CATEGORIES": json.dumps(
                {c: {"grace_seconds": s.grace_seconds} for c, s in settings.categories.items()}
            ),
            "TZPUSH_METRICS__PORT": "0",
            "TZPUSH_LOG_JSON": "false",
            "TZPUSH_LOG_LEVEL": "INFO",
        }
    )
    if settings.stomp.login:
        env["TZPUSH_STOMP__LOGIN"] = settings.stomp.login
    if settings.stomp.passcode:
        env["TZPUSH_STOMP__PASSCODE"] = settings.stomp.passcode.get_secret_value()
    env.update(extra)
    return env


TZPUSH = REPO_ROOT / ".venv" / "bin" / "tzpush"


class ConsumerProcess:
    """``tzpush consumer`` in its own process; logs go to ``log_path``."""

    def __init__(self, settings: Settings, log_path: Path, **extra_env: str) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in wait/kill)
        self.proc = subprocess.Popen(
            [str(TZPUSH), "consumer"],
            cwd=REPO_ROOT,
            env=consumer_env(settings, **extra_env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_consuming(self, timeout: float = 30.0) -> None:
        """Until the process logged that it subscribed (or fail with its log)."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"consumer exited {self.proc.returncode}:\n{self.log()}")
            return " consuming " in self.log()

        wait_for(ready, timeout, what="the consumer subprocess to subscribe")

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> None:
        os.kill(self.pid, signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        """Make sure the process is gone (SIGKILL by pid if still running)."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()


def elapsed_since(start: float) -> float:
    return time.monotonic() - start
