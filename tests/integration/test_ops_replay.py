"""tzpush replay: dry run changes nothing; double and concurrent replays send each message once;
a token that died since is cancelled with that reason; outcomes recorded as the consumer does."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest

from ops.replay import Replayer, Selection, select
from shared.clock import utcnow
from shared.expo.sender import ExpoSender
from tests.integration.ops_helpers import missed, run_cli


def test_dry_run_lists_and_changes_nothing(world, capsys):
    for u in ("r1", "r2"):
        world.user(u, "Asia/Tashkent")
    ids = missed(world, ["r1", "r2"])
    before = {i: world.message(i) for i in ids}
    assert run_cli(world.settings, "replay", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "dry run: 2 message(s) would be replayed" in out
    for i in ids:
        assert i[:20] in out
        assert world.message(i) == before[i]
    assert world.fake.pushes() == []


def test_replay_twice_sends_once_and_records_who_and_why(world, capsys):
    for u in ("a1", "a2", "a3"):
        world.user(u, "Europe/Berlin")
    ids = missed(world, ["a1", "a2", "a3"])
    args = ("replay", "--yes", "--by", "alice", "--reason", "INC-42 broker outage")
    assert run_cli(world.settings, *args) == 0
    assert run_cli(world.settings, *args) == 0
    out = capsys.readouterr().out
    assert "replayed: success 3" in out
    assert "nothing to replay" in out  # the second run found nothing left
    assert len(world.fake.pushes()) == 3
    for i in ids:
        m = world.message(i)
        assert m["status"] == "success" and m["ticketId"]
        assert m["receipt"]["state"] == "pending"
        assert m["replay"]["by"] == "alice"
        assert m["replay"]["reason"] == "INC-42 broker outage"
        assert "grace 300 s" in m["replay"]["missedReason"]  # why it was missed, kept
    pushed = {p["data"]["messageId"] for p in world.fake.pushes()}
    assert pushed == set(ids)


def test_concurrent_replays_send_each_message_once(world):
    uids = [f"c{i}" for i in range(30)]
    for u in uids:
        world.user(u, "America/New_York")
    ids = missed(world, uids)
    docs = select(world.db, Selection())
    assert len(docs) == 30
    counts = []
    barrier = threading.Barrier(3)

    def replay(name: str) -> None:
        with ExpoSender(world.settings.expo) as sender:
            r = Replayer(world.db, world.settings, sender, name, "race")
            barrier.wait()
            counts.append(r.run(docs))

    threads = [threading.Thread(target=replay, args=(f"op{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(c["success"] for c in counts) == 30
    assert sum(c["skipped (taken by another replay)"] for c in counts) == 60
    pushed = [p["data"]["messageId"] for p in world.fake.pushes()]
    assert sorted(pushed) == sorted(ids)  # each exactly once
    assert set(world.statuses(ids).values()) == {"success"}


def test_dead_token_cancels_and_device_not_registered_deactivates(world):
    m = world.manager()
    world.user("dead", "Australia/Sydney", manager=m)
    world.user("gone", "Asia/Kathmandu", manager=m, token="ExponentPushToken[dead-ticket-g]")
    world.user("ok", "Pacific/Chatham", manager=m)
    ids = dict(zip(("dead", "gone", "ok"), missed(world, ["dead", "gone", "ok"]), strict=True))
    m.unregister_token(device="dev-dead")  # the user logged out after the miss
    assert run_cli(world.settings, "replay", "--yes", "--user", "dead,gone,ok") == 0
    dead = world.message(ids["dead"])
    assert dead["status"] == "cancelled"
    assert dead["reason"] == "not replayed: token no longer active (unregistered)"
    gone = world.message(ids["gone"])
    assert gone["status"] == "failed" and gone["error"] == "DeviceNotRegistered"
    tok = world.db["notification_tokens"].find_one({"userId": "gone"})
    assert tok["isActive"] is False and tok["deactivationReason"] == "DeviceNotRegistered"
    assert world.message(ids["ok"])["status"] == "success"
    assert [p["to"] for p in world.fake.pushes()] == ["ExponentPushToken[ok]"]


def test_selection_by_category_and_time_and_messages_show(world, capsys):
    world.user("s1", "UTC")
    old = missed(world, ["s1"], hours_ago=5, category="meal", label="breakfast")
    hour_ago = (utcnow() - dt.timedelta(hours=1)).replace(microsecond=0)
    new = missed(world, ["s1"], due=hour_ago, category="meal", label="lunch")
    other = missed(world, ["s1"], due=hour_ago, category="safety", label="check")
    assert [d["_id"] for d in select(world.db, Selection(categories=["meal"]))] == old + new
    since = world.message(new[0])["scheduledAt"]
    assert [d["_id"] for d in select(world.db, Selection(since=since))] == sorted(new + other)
    assert [d["_id"] for d in select(world.db, Selection(ids=other))] == other
    assert run_cli(world.settings, "messages", "show", other[0]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["message"]["status"] == "is_missed"
    assert shown["sendGuard"]["owner"] == "janitor"
    assert shown["token"]["isActive"] is True
    from shared.errors import NotFoundError

    with pytest.raises(NotFoundError):
        run_cli(world.settings, "messages", "show", "nope")
