"""A consumer on the memory twin with a fake clock: its parts run in the test's own thread.

Wake-ups reach the intake as frames from a broker double; the test moves the clock and runs
what is due (``Rig.run_until``): preparation at the lead time, dispatch at the due instant. The
HTTP edge is the devstack Expo fake over loopback, as in the integration tests; the recorder
keeps its thread, and ``run_until`` waits (with a timeout) until it has written everything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from consumer.timers import Timers
from consumer.worker import Consumer
from devstack.fake_expo import FakeExpo
from shared.broker import Frame
from shared.clock import FakeClock
from shared.domain.messages import Doc, new_message
from shared.domain.plan import group_wakeups
from shared.expo.sender import ExpoSender
from shared.settings import Settings
from shared.store.memory import Tables, memory_stores

T0 = dt.datetime(2026, 3, 2, 7, 59, 0, tzinfo=dt.UTC)


class InlineExecutor(Executor):
    """Runs each task at once in the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        f: Future[Any] = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            f.set_exception(exc)
        return f


@dataclass
class BrokerDouble:
    """What the consumer's broker link needs of a STOMP client: acks and sends, recorded."""

    connected: bool = True
    acked: list[str] = field(default_factory=list)
    sent: list[tuple[str, bytes, dict[str, str]]] = field(default_factory=list)

    def ack(self, frame: Frame) -> None:
        self.acked.append(frame.message_id)

    def send(self, destination: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.sent.append((destination, body, headers or {}))

    def close(self) -> None:
        self.connected = False


@dataclass
class Rig:
    settings: Settings
    clock: FakeClock
    tables: Tables
    consumer: Consumer
    fake: FakeExpo
    broker: BrokerDouble

    # -- data ---------------------------------------------------------------------------------
    def user(self, uid: str, *, cap: int | None = None, **prefs: Any) -> None:
        """A user in UTC with one active registration ``tok-<uid>`` and a daily reminder."""
        self.tables.put(
            "users", {"_id": uid, "timezone": "UTC", "prefs": prefs or {}, "dailyCap": cap}
        )
        self.tables.put(
            "tokens",
            {
                "_id": f"tok-{uid}",
                "userId": uid,
                "deviceId": f"dev-{uid}",
                "token": f"ExponentPushToken[{uid}]",
                "isActive": True,
                "failureCount": 0,
            },
        )
        self.tables.put(
            "reminders",
            {"_id": f"rem-{uid}", "userId": uid, "category": "meal", "label": "lunch"},
        )

    def message(self, uid: str, due: dt.datetime, *, label: str = "lunch") -> Doc:
        """The pending message a planning pass makes for ``uid``'s reminder ``label`` (made
        here if new), due at ``due``."""
        rid = f"rem-{uid}" if label == "lunch" else f"rem-{uid}-{label}"
        if self.tables.get("reminders", rid) is None:
            self.tables.put(
                "reminders", {"_id": rid, "userId": uid, "category": "meal", "label": label}
            )
        user = self.tables.get("users", uid)
        reminder = self.tables.get("reminders", rid)
        token = self.tables.get("tokens", f"tok-{uid}")
        assert user and reminder and token
        reminder.update(title="Lunch", body="time to eat")
        doc = new_message(reminder, user, token, due, due.date(), self.clock())
        self.tables.put("messages", doc)
        return doc

    def change(self, table: str, doc_id: str, **fields: Any) -> None:
        """Change a stored document and stamp its user in the intent-change log, as the
        management code does."""
        doc = self.tables.get(table, doc_id)
        assert doc is not None
        doc.update(fields)
        self.tables.put(table, doc)
        user = doc["_id"] if table == "users" else doc["userId"]
        self.consumer.recording.stores.changes.record([user], self.clock())

    # -- running ------------------------------------------------------------------------------
    def deliver(self, docs: list[Doc], *, redelivered: bool = False) -> list[Frame]:
        """Hand the wake-ups of ``docs`` to the consumer's intake, as the broker would."""
        c = self.settings.creator
        frames = []
        for w in group_wakeups(
            docs,
            size=c.wakeup_size,
            window_s=self.settings.wakeup.window_seconds,
            planned_at=self.clock(),
        ):
            frame = Frame(
                destination=self.settings.queue(w.category),
                body=w.encode(),
                message_id=f"frame-{uuid.uuid4().hex[:8]}",
                ack_id="1",
                subscription="0",
                redelivered=redelivered,
                headers={},
            )
            self.consumer.intake.on_frame(frame)
            frames.append(frame)
        return frames

    def run_until(self, instant: dt.datetime) -> int:
        """Move the clock to ``instant``, run what is due by then, wait until it is recorded;
        how many timers ran."""
        self.clock.set(instant)
        ran = self.consumer.timers.run_due()
        assert self.consumer.recorder.wait_idle(10), "the recorder did not finish"
        return ran

    def status(self, message_id: str) -> tuple[str, str | None]:
        doc = self.tables.get("messages", message_id)
        assert doc is not None
        return doc["status"], doc.get("reason")

    def pushes(self) -> list[dict[str, Any]]:
        return self.fake.pushes()


@contextlib.contextmanager
def make_rig(**fake_kw: Any) -> Iterator[Rig]:
    fake_kw.setdefault("rate_per_second", 0)
    fake = FakeExpo(**fake_kw).start()
    base = Settings.load()
    settings = base.model_copy(
        update={
            "expo": base.expo.model_copy(
                update={"base_url": fake.url, "rate_per_second": 100000.0, "max_retries": 0}
            ),
            "wakeup": base.wakeup.model_copy(update={"lead_seconds": 2.0}),
        }
    )
    clock = FakeClock(T0)
    tables = Tables()
    sender = ExpoSender(settings.expo)
    consumer = Consumer(
        settings,
        memory_stores(tables),
        sender,
        clock=clock,
        consumer_id="cons-rig",
        timers=Timers(clock, thread=False),
        executor=lambda workers, name: InlineExecutor(),
    )
    broker = BrokerDouble()
    consumer.link.client = broker  # type: ignore[assignment]
    try:
        yield Rig(settings, clock, tables, consumer, fake, broker)
    finally:
        consumer.recorder.stop(5)
        sender.close()
        fake.stop()
