"""A test harness over the real stack: one isolated world per test.

Each ``World`` gets its own queue prefix (so wake-ups of one test never reach another), a fresh
Expo fake over real HTTP, and helpers to create users/reminders/tokens through the management
API, to put messages due at arbitrary instants (reminders are minute-granular; tests should not
wait for the next whole minute), and to run consumers in threads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pymongo import monitoring
from pymongo.database import Database

from consumer.worker import Consumer
from creator.manage import Manager
from creator.planner import Planner
from devstack.fake_expo import FakeExpo
from shared.broker import Frame, StompClient
from shared.clock import utcnow
from shared.domain.messages import new_message
from shared.expo.sender import ExpoSender
from shared.settings import Settings
from shared.store import db as dbm

Doc = dict[str, Any]


def wait_for(
    pred: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> Any:
    """Poll ``pred`` until truthy; fail the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or pred}")
        time.sleep(interval)


class MessageReads(monitoring.CommandListener):
    """What the database returned to reads of the messages, in order with the broker's sends."""

    def __init__(self, events: list[tuple[str, int]]) -> None:
        self.events = events
        self._mine: set[int] = set()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        cmd = event.command
        coll = cmd.get("find") if event.command_name == "find" else cmd.get("collection")
        if event.command_name in ("find", "getMore") and coll == dbm.MESSAGES:
            self._mine.add(event.request_id)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        if event.request_id in self._mine:
            cursor = event.reply.get("cursor", {})
            batch = cursor.get("firstBatch", cursor.get("nextBatch", []))
            self.events.append(("read", len(batch)))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@dataclass
class RunningConsumer:
    consumer: Consumer
    sender: ExpoSender
    thread: threading.Thread
    result: list[int] = field(default_factory=list)

    def stop(self, timeout: float = 30.0) -> None:
        self.consumer.stop()
        self.thread.join(timeout)
        self.sender.close()

    def join(self, timeout: float = 60.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "consumer did not finish"
        self.sender.close()


@dataclass
class World:
    settings: Settings
    db: Database[Doc]
    fake: FakeExpo
    clients: list[StompClient] = field(default_factory=list)
    consumers: list[RunningConsumer] = field(default_factory=list)

    # -- wiring ------------------------------------------------------------------------------
    def broker(self) -> StompClient:
        c = StompClient(self.settings).connect()
        self.clients.append(c)
        return c

    def dead_letters(self) -> queue.Queue[Frame]:
        """Frames that reach this world's dead-letter queue, as they arrive."""
        inbox: queue.Queue[Frame] = queue.Queue()
        client = StompClient(self.settings, inbox=inbox).connect()
        self.clients.append(client)
        client.subscribe(self.settings.dlq, prefetch=10)
        return inbox

    def planner(self, clock: Callable[[], dt.datetime] = utcnow) -> Planner:
        dbm.ensure_indexes(self.db)
        return Planner(self.db, self.broker(), self.settings, clock=clock)

    def manager(self) -> Manager:
        p = self.planner()
        return Manager(self.db, p, self.settings)

    def start_consumer(
        self, *, burst: bool = False, idle_s: float = 2.0, **kw: Any
    ) -> RunningConsumer:
        sender = ExpoSender(self.settings.expo)
        consumer = Consumer(self.settings, self.db, sender, **kw)
        rc = RunningConsumer(consumer, sender, threading.Thread(target=lambda: None))
        rc.thread = threading.Thread(
            target=lambda: rc.result.append(consumer.run(burst=burst, idle_s=idle_s)),
            name=f"test-{consumer.cid}",
            daemon=True,
        )
        rc.thread.start()
        self.consumers.append(rc)
        return rc

    # -- data --------------------------------------------------------------------------------
    def user(
        self,
        uid: str,
        tz: str = "UTC",
        *,
        device: str | None = None,
        token: str | None = None,
        manager: Manager | None = None,
        **prefs: Any,
    ) -> Doc:
        """Create a user with one registered token (``ExponentPushToken[<uid>]`` by default)."""
        m = manager or self.manager()
        m.upsert_user(uid, timezone=tz, **prefs)
        return m.register_token(
            uid, device=device or f"dev-{uid}", token=token or f"ExponentPushToken[{uid}]"
        )

    def due_messages(
        self,
        user_ids: list[str],
        due: dt.datetime,
        *,
        category: str = "meal",
        label: str = "lunch",
        title: str = "Lunch",
        arm: bool = True,
        planner: Planner | None = None,
    ) -> list[Doc]:
        """Messages due at ``due`` (any instant) for these users, through a real reminder each.

        Creates (or reuses) one reminder per user far from now so no planning pass collides,
        then inserts the message documents a planning pass would create and arms them.
        """
        p = planner or self.planner()
        docs = []
        now = utcnow()
        for uid in user_ids:
            user = self.db[dbm.USERS].find_one({"_id": uid})
            assert user is not None, f"no user {uid}"
            rem = self.db[dbm.REMINDERS].find_one(
                {"userId": uid, "category": category, "label": label}
            )
            if rem is None:
                rem = {
                    "_id": uuid.uuid4().hex[:16],
                    "userId": uid,
                    "category": category,
                    "label": label,
                    "time": "03:33",
                    "offsetMinutes": 0,
                    "weekdays": None,
                    "title": title,
                    "body": None,
                    "data": None,
                    "active": True,
                    "isDeleted": False,
                    "version": 1,
                    "createdAt": now,
                    "updatedAt": now,
                }
                self.db[dbm.REMINDERS].insert_one(rem)
            local_date = due.astimezone(__import__("zoneinfo").ZoneInfo(user["timezone"])).date()
            for tok in self.db[dbm.TOKENS].find({"userId": uid, "isActive": True}):
                docs.append(new_message(rem, user, tok, due, local_date, now))
        if docs:
            self.db[dbm.MESSAGES].insert_many(docs, ordered=False)
            if arm:
                p.arm(docs)
        return docs

    def statuses(self, ids: list[str] | None = None) -> dict[str, str]:
        flt: Doc = {"_id": {"$in": ids}} if ids is not None else {}
        return {d["_id"]: d["status"] for d in self.db[dbm.MESSAGES].find(flt, {"status": 1})}

    def message(self, mid: str) -> Doc:
        doc = self.db[dbm.MESSAGES].find_one({"_id": mid})
        assert doc is not None
        return doc

    def all_terminal(self, ids: list[str]) -> bool:
        st = self.statuses(ids)
        return len(st) == len(ids) and all(s != "pending" for s in st.values())

    def settled(self, ids: list[str]) -> bool:
        """All terminal and every journaled outcome merged: a merge writes the messages'
        statuses first and then the token and cap side effects, so a test that reads a token
        as soon as the statuses are final can see it half way."""
        return self.all_terminal(ids) and self.db[dbm.JOURNAL].count_documents({}) == 0

    def pushes_to(self, token: str) -> list[Doc]:
        return [p for p in self.fake.pushes() if p["to"] == token]

    def close(self) -> None:
        for rc in self.consumers:
            if rc.thread.is_alive():
                rc.stop()
        for c in self.clients:
            c.close()
        self.fake.stop()


@contextlib.contextmanager
def make_world(base: Settings, database: Database[Doc], **fake_kw: Any) -> Iterator[World]:
    fake_kw.setdefault("rate_per_second", 0)
    fake_kw.setdefault("receipt_delay_s", 0)
    fake = FakeExpo(**fake_kw).start()
    settings = base.model_copy(
        update={
            "stomp": base.stomp.model_copy(update={"queue_prefix": f"t{uuid.uuid4().hex[:10]}"}),
            "expo": base.expo.model_copy(
                update={"base_url": fake.url, "rate_per_second": 100000.0, "max_retries": 5}
            ),
            "wakeup": base.wakeup.model_copy(update={"lead_seconds": 2.0}),
            "shutdown": base.shutdown.model_copy(update={"timeout_s": 5.0}),
            "outcomes": base.outcomes.model_copy(update={"receipts_delay_s": 0.0}),
        }
    )
    world = World(settings, database, fake)
    try:
        yield world
    finally:
        world.close()
