"""The planner's pure pieces, without a database or a broker: the pass report, bucket ranges and
chunks, and the wake-up publisher (on a recording broker)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest
from pydantic import SecretStr

from creator.context import PlanContext
from creator.report import LOG_BAD_DOCUMENTS, PassReport, ranges
from creator.stream import chunks, merged
from creator.wakeups import WAKEUP_BATCH, WakeupPublisher
from shared.domain.plan import BadDocument
from shared.settings import Settings
from shared.wire import SIGNATURE_HEADER, Item, WakeUp, sign

NOW = dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)


# -- the report --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ps", "shown"),
    [([], "none"), ([3], "3"), ([0, 1, 2, 5], "0-2,5"), ([7, 5, 6, 9, 10], "5-7,9-10")],
)
def test_partitions_are_shown_as_runs(ps: list[int], shown: str) -> None:
    assert ranges(ps) == shown


def test_a_pass_with_nothing_to_plan_says_so_and_what_it_holds() -> None:
    report = PassReport(partitions=[0, 1, 2], missed=4)
    assert report.summary() == (
        "nothing to plan (window already planned; partitions 0-2 held); 4 marked is_missed"
    )
    assert "no partition held" in PassReport().summary()


def test_a_planned_window_is_summed_up_in_one_line() -> None:
    report = PassReport(
        window_start=NOW,
        window_end=NOW + dt.timedelta(hours=24),
        reminders=10,
        planned=12,
        inserted=9,
        existing=2,
        conflicts=1,
        wakeups=3,
        partitions=[0, 1, 3],
        planned_partitions=[3],
        seconds=1.5,
        skipped=[BadDocument("user", "u1", "no timezone")],
    )
    assert report.summary() == (
        "partitions 0-1,3 held, 3 planned: planned 2026-03-29 00:30:00Z .. 2026-03-30 00:30:00Z: "
        "10 reminders -> 12 occurrences x tokens, 9 new, 2 already there, 1 conflicts; "
        "3 wake-ups armed; 0 marked is_missed; 1.50 s; 1 bad documents skipped (logged; "
        "`tzpush doctor` lists them)"
    )


def test_a_bad_document_is_reported_once_and_only_the_first_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    report = PassReport()
    bad = [BadDocument("reminder", f"r{i}", "bad time") for i in range(LOG_BAD_DOCUMENTS + 5)]
    report.add_skipped(bad[:3])
    report.add_skipped([*bad, BadDocument("user", "r0", "no timezone")])
    assert [(b.kind, b.id) for b in report.skipped] == [
        *(("reminder", f"r{i}") for i in range(LOG_BAD_DOCUMENTS + 5)),
        ("user", "r0"),
    ]
    logged = [r for r in caplog.records if r.name == "creator.planner"]
    assert sum("more than" in r.getMessage() for r in logged) == 1
    assert len(logged) == LOG_BAD_DOCUMENTS + 1


# -- bucket ranges -----------------------------------------------------------------------------
def test_adjacent_bucket_ranges_are_joined_and_sorted() -> None:
    assert merged([(8, 12), (0, 4), (4, 8), (20, 24)]) == [(0, 12), (20, 24)]
    assert merged([]) == []


def test_chunks_cut_each_range_into_about_the_target_number_of_reminders() -> None:
    # 10 reminders a bucket, 25 wanted a chunk: 2 buckets a chunk, the last one shorter.
    assert list(chunks([(0, 5), (8, 9)], 10.0, 25, 16)) == [(0, 2), (2, 4), (4, 5), (8, 9)]
    # More reminders in one bucket than wanted: a bucket a chunk, never none.
    assert list(chunks([(0, 3)], 1000.0, 25, 16)) == [(0, 1), (1, 2), (2, 3)]
    # No reminders at all: one chunk of all the buckets.
    assert list(chunks([(0, 16)], 0.0, 25, 16)) == [(0, 16)]


# -- the wake-up publisher ---------------------------------------------------------------------
class RecordingBroker:
    def __init__(self, connected: bool = True) -> None:
        self.connected = connected
        self.sent: list[tuple[str, bytes, int, dict[str, str] | None]] = []
        self.flushes = 0
        self.events: list[str] = []

    def connect(self) -> RecordingBroker:
        self.connected = True
        self.events.append("connect")
        return self

    def send(
        self, destination: str, body: bytes, *, delay_ms: int, headers: dict[str, str] | None
    ) -> None:
        self.sent.append((destination, body, delay_ms, headers))
        self.events.append("send")

    def flush(self) -> None:
        self.flushes += 1
        self.events.append("flush")


def publisher(broker: RecordingBroker | None, *, key: str | None = None) -> WakeupPublisher:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    if key is not None:
        stomp = settings.stomp.model_copy(update={"signing_key": SecretStr(key)})
        settings = settings.model_copy(update={"stomp": stomp})
    ctx = PlanContext(cast(Any, None), cast(Any, broker), settings, lambda: NOW)
    return WakeupPublisher(ctx)


def wakeup(n: int, due_in_s: float, category: str = "meal") -> WakeUp:
    due = NOW_MS + int(due_in_s * 1000)
    items = tuple(
        Item(f"m{n}-{i}", due + i, "u", "r", 1, "t", "ExponentPushToken[x]") for i in range(2)
    )
    return WakeUp(f"w{n}", category, NOW_MS, items)


def test_a_wakeup_is_scheduled_lead_before_its_first_due_instant_and_at_once_when_late() -> None:
    broker = RecordingBroker()
    pub = publisher(broker)
    lead = pub.ctx.settings.wakeup.lead_seconds
    progress: list[int] = []
    ws = [wakeup(1, 600), wakeup(2, 1), wakeup(3, -30, "mood")]
    assert pub.send(ws, progress.append) == ws
    assert [(d, delay) for d, _, delay, _ in broker.sent] == [
        ("/queue/tzpush.meal", int((600 - lead) * 1000)),
        ("/queue/tzpush.meal", 0),
        ("/queue/tzpush.mood", 0),
    ]
    assert [body for _, body, _, _ in broker.sent] == [w.encode() for w in ws]
    assert progress == [2, 2, 2]
    assert broker.flushes == 0  # confirmed by ``finish``, once


def test_a_wakeup_is_signed_when_a_key_is_set() -> None:
    broker = RecordingBroker()
    key = "k" * 32
    publisher(broker, key=key).send([wakeup(1, 60)])
    publisher(broker).send([wakeup(2, 60)])
    (_, body, _, signed), (_, _, _, unsigned) = broker.sent
    assert signed == {SIGNATURE_HEADER: sign(body, key)}
    assert unsigned is None


def test_arming_confirms_once_then_counts_and_a_dropped_broker_is_connected_first() -> None:
    broker = RecordingBroker(connected=False)
    pub = publisher(broker)
    counted: list[int] = []
    pub.ctx.on_armed = counted.append
    armed = pub.arm_all(iter([wakeup(n, 60 + n) for n in range(WAKEUP_BATCH + 3)]))
    assert armed == WAKEUP_BATCH + 3 and len(broker.sent) == armed
    assert broker.events[0] == "connect" and broker.events[-1] == "flush"
    assert broker.flushes == 1 and counted == [armed]


def test_nothing_to_arm_sends_confirms_and_counts_nothing_even_without_a_broker() -> None:
    counted: list[int] = []
    pub = publisher(None)
    pub.ctx.on_armed = counted.append
    assert pub.arm([]) == [] and pub.arm_all(iter([])) == 0
    assert counted == []
    with pytest.raises(RuntimeError, match="no broker"):
        pub.send([wakeup(1, 60)])
