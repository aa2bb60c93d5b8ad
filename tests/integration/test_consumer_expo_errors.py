"""Issue 15, "Expo errors mean what Expo says", through the whole pipeline: planned messages, a
real consumer on the real broker and database, the Expo fake over HTTP scripting error tickets.

- ``MessageRateExceeded`` backs off and sends that device's push again, within grace: it is
  delivered, and the device's token is never counted against.
- A token refused here as malformed is deactivated at once (it can never work).
- ``InvalidCredentials`` / ``MismatchSenderId`` / ``UNAUTHORIZED`` are the project's, not the
  device's: the message fails with that reason and code, the token is untouched however often.
- An unknown code fails the message and leaves the token alone.
"""

from __future__ import annotations

import datetime as dt

from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds
from tests.integration.harness import World, wait_for

RATE = "MessageRateExceeded"


def _series(world: World, uid: str, n: int, step_s: float = 1.0, label: str = "l") -> list[str]:
    """``n`` messages to ``uid``'s token, ``step_s`` apart from 3 s from now (one label each)."""
    p = world.planner()
    first = in_seconds(3)
    ids = []
    for k in range(n):
        due = first + dt.timedelta(seconds=k * step_s)
        ids += [d["_id"] for d in world.due_messages([uid], due, label=f"{label}{k}", planner=p)]
    return ids


def _token(world: World, token_id: str) -> dict:
    doc = world.db[dbm.TOKENS].find_one({"_id": token_id})
    assert doc is not None
    return doc


def test_message_rate_exceeded_is_sent_again_within_grace_and_spares_the_token(world):
    t = world.user("busy")
    world.fake.configure(ticket_errors={t["token"]: [RATE, RATE, RATE]})
    ids = _series(world, "busy", 2)
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 30, what="all terminal and merged")

    assert world.statuses(ids) == {i: "success" for i in ids}
    assert world.fake.stats()["ticket_errors"] == {RATE: 3}
    assert len(world.pushes_to(t["token"])) == 2  # each delivered once
    assert sum(world.message(i)["attempts"] for i in ids) == 5  # 2 sends + 3 after back-off
    for i in ids:
        m = world.message(i)
        assert m["lateness_ms"] < 30_000, "sent again within the window, not after grace"
    tok = _token(world, t["_id"])
    assert tok["isActive"] is True and tok.get("failureCount", 0) == 0


def test_a_locally_invalid_token_is_deactivated_at_once(world):
    t = world.user("legacy")
    bad = "ExponentPushToken[legacy token]"  # a space: no Expo token looks like this
    world.db[dbm.TOKENS].update_one({"_id": t["_id"]}, {"$set": {"token": bad}})
    ids = _series(world, "legacy", 2, step_s=2.0)
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="all terminal and merged")

    first, second = (world.message(i) for i in ids)
    assert first["status"] == "failed" and first["error"] == "InvalidToken"
    assert first["attempts"] == 0  # refused here: nothing went to Expo
    tok = _token(world, t["_id"])
    assert tok["isActive"] is False and tok["deactivationReason"] == "InvalidToken"
    assert second["status"] == "cancelled"
    assert second["reason"] == "token no longer active (InvalidToken)"
    assert world.fake.stats()["requests"] == 0


def test_project_level_errors_fail_the_message_and_never_touch_the_token(world):
    t = world.user("project")
    codes = ["InvalidCredentials", "MismatchSenderId", "InvalidCredentials"]
    world.fake.configure(ticket_errors={t["token"]: list(codes)})
    ids = _series(world, "project", 3)
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="all terminal and merged")

    tok = _token(world, t["_id"])
    assert tok["isActive"] is True and tok.get("failureCount", 0) == 0  # 3 would deactivate
    for mid, code in zip(ids, codes, strict=True):
        m = world.message(mid)
        assert m["status"] == "failed" and m["error"] == code and m["errorCode"] == code
        assert "project" in m["reason"] and "tokens untouched" in m["reason"]

    world.consumers[0].stop()
    world.fake.configure(access_token="rotated-by-someone")  # push security, a stale token here
    later = _series(world, "project", 1, label="later")
    world.start_consumer()
    wait_for(lambda: world.settled(later), 20, what="terminal and merged")
    m = world.message(later[0])
    assert m["status"] == "failed" and m["errorCode"] == "UNAUTHORIZED"
    assert _token(world, t["_id"]).get("failureCount", 0) == 0


def test_unknown_codes_fail_the_message_and_leave_the_token_alone(world):
    t = world.user("novel")
    world.fake.configure(ticket_errors={t["token"]: ["SomethingNew"] * 3})
    ids = _series(world, "novel", 4)
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="all terminal and merged")

    st = world.statuses(ids)
    assert [st[i] for i in ids] == ["failed", "failed", "failed", "success"]
    assert {world.message(i)["error"] for i in ids[:3]} == {"SomethingNew"}  # Expo's spelling
    assert {world.message(i)["errorCode"] for i in ids[:3]} == {"UnknownError"}
    tok = _token(world, t["_id"])
    assert tok["isActive"] is True and tok.get("failureCount", 0) == 0
