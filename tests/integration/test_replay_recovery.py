"""Issue 14, replay: a replay that dies is settled (rolled back or ended honestly), never left
``replaying``, and never pushes a message twice; a replay judges quiet hours and the daily cap
at its own instant, in the user's zone.

A replay dies in several ways: an error it sees (a database error, a sender that raises, a
record that fails, Ctrl-C) and settles itself on the way out; or it is killed hard and leaves
its messages ``replaying`` until its lease runs out, when the next replay or the janitor settles
them. Either way, a message whose Expo request may have left ends ``failed`` "outcome unknown"
(its attempt record says so) and every other one goes back to ``is_missed``, so the next replay
sends it once.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from creator import janitor
from creator.janitor import sweep
from ops.replay import Replayer, Selection, select
from shared.clock import utcnow
from shared.errors import TransientError
from shared.expo.sender import ExpoSender
from shared.store import db as dbm
from shared.store.mongo import creator_stores
from tests.integration.ops_helpers import missed, run_cli

UNKNOWN = "outcome unknown"


class DiesBeforeSending:
    """A sender whose process dies before its first request leaves."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def send(self, pushes: Sequence[Any], on_chunk_done: Any = None, before_request: Any = None):
        raise self.error


class DiesAfterRequest:
    """Sends the first ``n`` pushes for real (writing the crash record first, as before any
    request), then dies before any outcome is recorded: those pushes left, nobody knows it."""

    def __init__(self, real: ExpoSender, n: int, before: Callable[[], None] | None = None) -> None:
        self.real, self.n, self.before = real, n, before

    def send(self, pushes: Sequence[Any], on_chunk_done: Any = None, before_request: Any = None):
        if self.before is not None:
            self.before()
        self.real.send(list(pushes)[: self.n], before_request=before_request)
        raise ConnectionError("killed after the request left, before its outcome was recorded")


def _pushed(world) -> Counter[str]:
    return Counter(p["data"]["messageId"] for p in world.fake.pushes())


def _no_duplicates(world) -> None:
    twice = {m: n for m, n in _pushed(world).items() if n > 1}
    assert not twice, f"pushed more than once: {twice}"


def _dying_replay(world, sender: Any, *, clock: Callable[[], dt.datetime] = utcnow) -> None:
    docs = select(world.db, Selection())
    replayer = Replayer(world.db, world.settings, sender, "ghost", "INC-7", clock=clock)
    with pytest.raises(BaseException) as died:
        replayer.run(docs)
    assert not isinstance(died.value, AssertionError)


@pytest.mark.parametrize("error", ["sender", "ctrl-c", "database"])
def test_a_replay_that_dies_before_sending_rolls_back_and_the_next_sends_once(
    world, monkeypatch, error
):
    uids = [f"d{i}" for i in range(4)]
    for u in uids:
        world.user(u, "Europe/Berlin")
    ids = missed(world, uids)
    if error == "database":
        import shared.store.intent as stored_intent

        def down(*_: Any, **__: Any) -> Any:
            raise TransientError("database blip after the messages were taken")

        monkeypatch.setattr(stored_intent, "current_of", down)
        _dying_replay(world, ExpoSender(world.settings.expo))
        monkeypatch.undo()
    else:
        exc = ConnectionError("sender died") if error == "sender" else KeyboardInterrupt()
        _dying_replay(world, DiesBeforeSending(exc))
    after = world.statuses(ids)
    assert set(after.values()) == {"is_missed"}, after  # rolled back at once, nothing left
    assert world.fake.pushes() == []
    assert run_cli(world.settings, "replay", "--yes") == 0
    assert set(world.statuses(ids).values()) == {"success"}
    assert _pushed(world) == Counter({i: 1 for i in ids})


def test_a_replay_that_dies_after_its_request_left_ends_it_outcome_unknown_never_resent(world):
    uids = [f"a{i}" for i in range(5)]
    for u in uids:
        world.user(u, "Asia/Kolkata")
    ids = missed(world, uids)
    with ExpoSender(world.settings.expo) as real:
        _dying_replay(world, DiesAfterRequest(real, 2))
    left = set(_pushed(world))
    assert len(left) == 2
    after = world.statuses(ids)
    assert "replaying" not in after.values(), after
    for i in ids:
        m = world.message(i)
        if i in left:
            assert m["status"] == "failed" and UNKNOWN in m["reason"], m
        else:
            assert m["status"] == "is_missed", m
    assert run_cli(world.settings, "replay", "--yes") == 0
    _no_duplicates(world)
    assert set(_pushed(world)) == set(ids)
    assert {world.message(i)["status"] for i in set(ids) - left} == {"success"}


def test_a_replay_killed_hard_is_settled_by_the_janitor_once_its_lease_ran_out(world, monkeypatch):
    uids = [f"k{i}" for i in range(4)]
    for u in uids:
        world.user(u, "America/Sao_Paulo")
    ids = missed(world, uids)
    # SIGKILL: none of the replay's own clean-up runs. Its clock is an hour behind, so its
    # lease on what it took ran out long ago.
    import ops.replay as replay_mod

    monkeypatch.setattr(replay_mod.Replayer, "_stop", lambda self, error: None, raising=False)
    hour_ago: Callable[[], dt.datetime] = lambda: utcnow() - dt.timedelta(hours=1)  # noqa: E731
    with ExpoSender(world.settings.expo) as real:
        _dying_replay(world, DiesAfterRequest(real, 1), clock=hour_ago)
    assert set(world.statuses(ids).values()) == {"replaying"}
    (left,) = _pushed(world)
    monkeypatch.setattr(janitor, "_replays_checked", {}, raising=False)
    sweep(creator_stores(world.db).pending, world.settings, utcnow())
    after = world.statuses(ids)
    assert after[left] == "failed" and UNKNOWN in world.message(left)["reason"]
    assert {after[i] for i in ids if i != left} == {"is_missed"}, after
    assert run_cli(world.settings, "replay", "--yes") == 0
    _no_duplicates(world)
    assert set(_pushed(world)) == set(ids)


def test_the_next_replay_settles_a_replay_killed_hard_before_selecting(world, monkeypatch, capsys):
    uids = [f"n{i}" for i in range(3)]
    for u in uids:
        world.user(u, "UTC")
    ids = missed(world, uids)
    import ops.replay as replay_mod

    monkeypatch.setattr(replay_mod.Replayer, "_stop", lambda self, error: None, raising=False)
    hour_ago: Callable[[], dt.datetime] = lambda: utcnow() - dt.timedelta(hours=1)  # noqa: E731
    _dying_replay(world, DiesBeforeSending(ConnectionError("gone")), clock=hour_ago)
    assert set(world.statuses(ids).values()) == {"replaying"}
    assert run_cli(world.settings, "replay", "--yes") == 0
    out = capsys.readouterr().out
    assert "3 back to is_missed" in out
    assert set(world.statuses(ids).values()) == {"success"}
    assert _pushed(world) == Counter({i: 1 for i in ids})


def test_a_message_left_replaying_by_the_old_replay_ends_outcome_unknown(world, monkeypatch):
    """Before attempt records, nothing said whether such a message left: never resend it."""
    world.user("old", "UTC")
    (mid,) = missed(world, ["old"])
    world.db[dbm.MESSAGES].update_one(
        {"_id": mid},
        {
            "$set": {
                "status": "replaying",
                "replay": {"by": "bob", "at": utcnow() - dt.timedelta(days=1), "reason": "x"},
            }
        },
    )
    monkeypatch.setattr(janitor, "_replays_checked", {}, raising=False)
    sweep(creator_stores(world.db).pending, world.settings, utcnow())
    m = world.message(mid)
    assert m["status"] == "failed" and UNKNOWN in m["reason"]
    assert run_cli(world.settings, "replay", "--yes") == 0
    assert world.fake.pushes() == []


def test_a_replay_fenced_by_a_settler_sends_nothing_more(world):
    """A replay slower than its lease is settled by someone else: from then on none of its
    requests leave (each checks, after writing its crash record, that it still holds them)."""
    from shared.store import replays
    from shared.store.mongo import replay_stores

    uids = [f"f{i}" for i in range(3)]
    for u in uids:
        world.user(u, "UTC")
    ids = missed(world, uids)
    hour_ago: Callable[[], dt.datetime] = lambda: utcnow() - dt.timedelta(hours=1)  # noqa: E731
    settled: list[Any] = []

    def janitor_meanwhile() -> None:
        settled.append(replays.settle_stale(replay_stores(world.db), utcnow(), "janitor"))

    with ExpoSender(world.settings.expo) as real:
        _dying_replay(world, DiesAfterRequest(real, 3, before=janitor_meanwhile), clock=hour_ago)
    assert world.fake.pushes() == []
    assert settled and set(world.statuses(ids).values()) == {"is_missed"}
    assert run_cli(world.settings, "replay", "--yes") == 0
    assert _pushed(world) == Counter({i: 1 for i in ids})


def test_a_hand_edited_document_is_left_missed_and_the_others_are_sent(world):
    for u in ("h1", "h2", "h3"):
        world.user(u, "Europe/Lisbon")
    ids = missed(world, ["h1", "h2", "h3"])
    world.db[dbm.MESSAGES].update_one({"_id": ids[1]}, {"$unset": {"token": ""}})
    counts = Replayer(
        world.db, world.settings, ExpoSender(world.settings.expo), "eve", "hand-edit"
    ).run(select(world.db, Selection()))
    st = world.statuses(ids)
    assert st[ids[0]] == st[ids[2]] == "success"
    assert st[ids[1]] == "is_missed"
    assert "token" in world.message(ids[1])["replay"]["leftMissed"]
    assert counts["success"] == 2 and sum(counts.values()) == 3
    assert set(_pushed(world)) == {ids[0], ids[2]}


def _quiet_now(tz: str) -> tuple[str, str]:
    local = utcnow().astimezone(ZoneInfo(tz))
    return (
        (local - dt.timedelta(minutes=30)).strftime("%H:%M"),
        (local + dt.timedelta(minutes=60)).strftime("%H:%M"),
    )


def test_a_replay_inside_the_users_quiet_hours_now_does_not_push(world, capsys):
    # Due five hours ago, outside the quiet hours; replayed now, inside them.
    world.user("sleepy", "Asia/Tokyo", quiet_hours=_quiet_now("Asia/Tokyo"))
    world.user("awake", "Asia/Tokyo")
    sleepy, awake = missed(world, ["sleepy", "awake"], hours_ago=5)
    assert run_cli(world.settings, "replay", "--yes") == 0
    assert _pushed(world) == Counter({awake: 1})
    m = world.message(sleepy)
    assert m["status"] == "is_missed"  # left for a later replay, outside quiet hours
    assert "quiet hours" in m["replay"]["leftMissed"] and "Asia/Tokyo" in m["replay"]["leftMissed"]
    assert "left is_missed (quiet hours) 1" in capsys.readouterr().out


def test_a_replay_applies_the_daily_cap_of_the_users_day_now(world):
    tz = "Pacific/Auckland"
    today = utcnow().astimezone(ZoneInfo(tz)).date().isoformat()
    world.user("full", tz, daily_cap=1)
    world.user("room", tz, daily_cap=2)
    # Each already got one push today (local date of the replay, in the user's zone).
    for u in ("full", "room"):
        world.db[dbm.COUNTERS].insert_one({"_id": f"{u}:{today}", "count": 1})
    (full,) = missed(world, ["full"], label="a")
    room = missed(world, ["room"], label="a") + missed(world, ["room"], label="b")
    assert run_cli(world.settings, "replay", "--yes") == 0
    m = world.message(full)
    assert m["status"] == "cancelled" and "daily cap of 1 reached" in m["reason"]
    assert sorted(world.statuses(room).values()) == ["cancelled", "success"]
    assert set(_pushed(world)) <= set(room) and len(_pushed(world)) == 1
    counters = {d["_id"]: d["count"] for d in world.db[dbm.COUNTERS].find()}
    assert counters == {f"full:{today}": 1, f"room:{today}": 2}
