"""Wake-ups over a stream of documents (a re-arm's cursor), and the snapshot time they carry."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from shared.domain.plan import WakeupStream, group_wakeups

NOW = dt.datetime(2026, 10, 24, 12, 0, tzinfo=dt.UTC)
BASE = dt.datetime(2026, 10, 24, 18, 0, tzinfo=dt.UTC)


def doc(i: int, category: str, at: dt.datetime, **kw: Any) -> dict[str, Any]:
    return {
        "_id": f"m{i:04d}",
        "category": category,
        "scheduledAt": at,
        "userId": f"u{i}",
        "reminderId": "r",
        "notificationTokenId": "t",
        "token": "x",
        **kw,
    }


def stream(docs: list[dict[str, Any]], chunk: int, **kw: Any) -> tuple[list[Any], int]:
    """Feed ``docs`` (in due order) ``chunk`` at a time; the wake-ups and the most ever held."""
    s = WakeupStream(planned_at=NOW, **kw)
    out, most = [], 0
    for i in range(0, len(docs), chunk):
        out += s.add(docs[i : i + chunk])
        most = max(most, s.held)
    return out + s.close(), most


def shape(wakeups: list[Any]) -> list[tuple[str, tuple[str, ...]]]:
    return sorted((w.id, tuple(i.id for i in w.items)) for w in wakeups)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 10, 64, 1000])
def test_streamed_wakeups_are_those_of_one_grouping_when_instants_are_distinct(chunk: int) -> None:
    rng = random.Random(chunk)
    cats = ["meal", "mood", "safety"]
    gaps = [rng.choice([1, 5, 20, 61, 300]) for _ in range(300)]
    docs, at = [], BASE
    for i, gap in enumerate(gaps):
        at += dt.timedelta(seconds=gap)
        docs.append(doc(i, rng.choice(cats), at))
    kw: dict[str, Any] = {"size": 4, "window_s": 60}
    got, most = stream(docs, chunk, **kw)
    assert shape(got) == shape(group_wakeups(docs, planned_at=NOW, **kw))
    # At most one open wake-up per category is carried, never the input.
    assert most <= len(cats) * (4 - 1)


def test_a_chunk_split_inside_one_instant_still_gives_full_wakeups() -> None:
    docs = [doc(i, "meal", BASE) for i in range(23)]
    got, most = stream(docs, 5, size=4, window_s=60)
    assert sorted(len(w.items) for w in got) == [3] + [4] * 5
    assert sorted(i.id for w in got for i in w.items) == [d["_id"] for d in docs]
    assert most <= 3


def test_a_full_or_closed_wakeup_is_not_held_back() -> None:
    s = WakeupStream(planned_at=NOW, size=2, window_s=60)
    first = s.add([doc(1, "meal", BASE), doc(2, "meal", BASE), doc(3, "mood", BASE)])
    assert [[i.id for i in w.items] for w in first] == [["m0001", "m0002"]]
    assert s.held == 1  # the mood wake-up may still grow
    later = BASE + dt.timedelta(seconds=61)
    assert [[i.id for i in w.items] for w in s.add([doc(4, "meal", later)])] == [["m0003"]]
    assert [[i.id for i in w.items] for w in s.close()] == [["m0004"]]


def test_documents_out_of_due_order_are_refused() -> None:
    s = WakeupStream(planned_at=NOW, size=4, window_s=60)
    s.add([doc(1, "meal", BASE + dt.timedelta(seconds=10))])
    with pytest.raises(ValueError, match="due order"):
        s.add([doc(2, "meal", BASE)])


def test_a_wakeup_carries_the_oldest_snapshot_of_what_it_names() -> None:
    old = NOW - dt.timedelta(hours=5)
    docs = [
        doc(1, "meal", BASE, plannedAt=NOW - dt.timedelta(hours=1)),
        doc(2, "meal", BASE, plannedAt=old),
        doc(3, "mood", BASE, plannedAt=NOW - dt.timedelta(minutes=3)),
        doc(4, "safety", BASE),  # no plannedAt: as old as the arming
        doc(5, "activity", BASE, plannedAt=NOW + dt.timedelta(minutes=1)),  # a clock ahead
    ]
    ws = {w.category: w for w in group_wakeups(docs, size=10, window_s=60, planned_at=NOW)}

    def ms(t: dt.datetime) -> int:
        return int(t.timestamp() * 1000)

    assert ws["meal"].planned_ms == ms(old)
    assert ws["mood"].planned_ms == ms(NOW - dt.timedelta(minutes=3))
    assert ws["safety"].planned_ms == ms(NOW)
    assert ws["activity"].planned_ms == ms(NOW)  # never later than the arming


def test_a_takeover_stream_marks_its_wakeups() -> None:
    got, _ = stream([doc(1, "meal", BASE)], 1, size=4, window_s=60, takeover=True)
    assert [w.takeover for w in got] == [True]
    assert [
        w.takeover
        for w in group_wakeups([doc(1, "meal", BASE)], size=4, window_s=60, planned_at=NOW)
    ] == [False]
