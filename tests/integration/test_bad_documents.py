"""Issue 15: one bad document never stops a loop. It is skipped and reported (a log line with
its id and what is wrong, a metric, ``tzpush doctor``), the rest of the work goes on, and nothing
is left guarded.

Bad documents are written straight into the database, as a bug, a migration or another writer
would leave them: the management commands refuse them where they enter.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from consumer.checks import IntentCheck
from consumer.receipts import ReceiptPoller
from creator.janitor import sweep
from ops.doctor import run_checks
from shared.clock import utcnow
from shared.errors import PermanentError
from shared.expo.sender import ExpoSender
from shared.store import db as dbm
from shared.store.mongo import creator_stores
from tests.integration.consumer_support import in_seconds
from tests.integration.harness import World, wait_for


def bad_count(stage: str, kind: str) -> float:
    value = REGISTRY.get_sample_value("tzpush_bad_documents_total", {"stage": stage, "kind": kind})
    return value or 0.0


def raw_reminder(rid: str, uid: str, **kw: Any) -> dict[str, Any]:
    now = utcnow()
    return {
        "_id": rid,
        "userId": uid,
        "category": "meal",
        "label": rid,
        "time": "12:30",
        "offsetMinutes": 0,
        "weekdays": None,
        "title": "Hi",
        "body": None,
        "data": None,
        "active": True,
        "isDeleted": False,
        "version": 1,
        "createdAt": now,
        "updatedAt": now,
    } | kw


# -- the planner ---------------------------------------------------------------------------------
def test_a_pass_skips_bad_reminders_and_users_plans_the_rest_and_runs_the_janitor(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    m = world.manager()
    world.user("good", manager=m)
    m.add_reminder("good", category="mood", label="evening", at="20:00")
    overdue = world.due_messages(
        ["good"], utcnow() - dt.timedelta(hours=1), category="safety", arm=False
    )[0]["_id"]
    # The bad ones sort before and inside the good one's category ("activity" < "meal" < "mood").
    world.db[dbm.USERS].insert_one({"_id": "mars", "timezone": "Mars/Olympus_Mons"})
    world.db[dbm.TOKENS].insert_one(
        {
            "_id": "t-mars",
            "userId": "mars",
            "deviceId": "d-mars",
            "token": "ExponentPushToken[mars]",
            "isActive": True,
        }
    )
    no_label = raw_reminder("r-nolabel", "good", category="mood")
    del no_label["label"]
    world.db[dbm.REMINDERS].insert_many(
        [
            raw_reminder("r-zone", "mars", category="activity"),
            raw_reminder("r-time", "good", category="activity", time="8:00"),
            raw_reminder("r-day", "good", category="mood", weekdays=[0, 7]),
            no_label,
        ]
    )
    before = bad_count("planner", "reminder"), bad_count("planner", "user")
    caplog.set_level(logging.WARNING, logger="creator.planner")

    report = world.planner().run_pass()

    planned = {d["reminderId"] for d in world.db[dbm.MESSAGES].find({"status": "pending"})}
    evening = world.db[dbm.REMINDERS].find_one({"label": "evening"})
    assert evening is not None and evening["_id"] in planned
    assert not planned & {"r-zone", "r-time", "r-day", "r-nolabel"}
    states = list(world.db[dbm.PARTITIONS].find())
    assert len(states) == world.settings.creator.partitions
    for state in states:  # the pass ended: no re-arm next time
        assert "inProgress" not in state
        assert state["plannedUntil"] == report.window_end.replace(
            microsecond=report.window_end.microsecond // 1000 * 1000
        )
    assert world.message(overdue)["status"] == "is_missed"  # the janitor ran after planning
    assert report.missed == 1
    skipped = {(b.kind, b.id) for b in report.skipped}
    assert skipped == {
        ("user", "mars"),
        ("reminder", "r-time"),
        ("reminder", "r-day"),
        ("reminder", "r-nolabel"),
    }
    assert "4 bad documents skipped" in report.summary()
    assert bad_count("planner", "reminder") - before[0] == 3
    assert bad_count("planner", "user") - before[1] == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "r-time" in logged and "'8:00'" in logged
    assert "mars" in logged and "Mars/Olympus_Mons" in logged

    again = world.planner().run_pass()
    assert again.window_start is None


# -- the janitor ---------------------------------------------------------------------------------
def test_the_janitor_ends_a_bad_overdue_message_and_the_rest(world: World) -> None:
    world.user("j")
    due = utcnow() - dt.timedelta(hours=2)
    good = world.due_messages(["j"], due, category="safety", arm=False)[0]
    bad = dict(good, _id="bad-message", label="other", reminderId="other-reminder")
    del bad["category"]
    world.db[dbm.MESSAGES].insert_one(bad)
    before = bad_count("janitor", "message")

    ended = sweep(creator_stores(world.db).pending, world.settings, utcnow())

    assert ended == 2
    assert world.message(good["_id"])["status"] == "is_missed"
    doc = world.message("bad-message")
    assert doc["status"] == "failed"
    assert doc["reason"].startswith("bad document:") and "category" in doc["reason"]
    assert bad_count("janitor", "message") - before == 1
    assert world.db[dbm.SENDS].count_documents({"_id": "bad-message"}) in (0, 1)


# -- the receipts poller ---------------------------------------------------------------------------
class RefusingSender:
    """An ExpoSender whose getReceipts Expo refuses (400) when ``poison`` is asked for, or
    always (401, as for a wrong access token) when ``all`` is set."""

    def __init__(self, sender: ExpoSender, poison: str = "", refuse_all: bool = False) -> None:
        self.sender = sender
        self.poison = poison
        self.refuse_all = refuse_all
        self.requests = 0

    def get_receipts(self, ids: list[str]) -> Any:
        self.requests += 1
        if self.refuse_all:
            raise PermanentError("getReceipts failed: UNAUTHORIZED: The bearer token is invalid.")
        if self.poison in ids:
            raise PermanentError('getReceipts failed: VALIDATION_ERROR: "ids" are not valid')
        return self.sender.get_receipts(ids)


@pytest.fixture
def sender(world: World) -> Iterator[ExpoSender]:
    s = ExpoSender(world.settings.expo)
    try:
        yield s
    finally:
        s.close()


def _sent(world: World, users: list[str]) -> list[str]:
    for uid in users:
        world.user(uid)
    ids = [d["_id"] for d in world.due_messages(users, in_seconds(2))]
    world.start_consumer()
    wait_for(lambda: world.all_terminal(ids), 20, what="sent")
    assert set(world.statuses(ids).values()) == {"success"}
    return ids


def test_the_poller_sets_aside_a_bad_document_and_records_the_rest(world, sender) -> None:
    (mid,) = _sent(world, ["fine"])
    bad = dict(world.message(mid), _id="bad-receipt", label="other")
    del bad["notificationTokenId"]
    world.db[dbm.MESSAGES].insert_one(bad)
    before = bad_count("receipts", "message")

    counts = ReceiptPoller(world.settings, world.db, sender).poll_once()

    assert counts == {"ok": 1, "bad_document": 1}
    assert world.message(mid)["receipt"]["state"] == "ok"
    receipt = world.message("bad-receipt")["receipt"]
    assert receipt["state"] == "unknown"
    assert "bad document" in receipt["reason"] and "notificationTokenId" in receipt["reason"]
    assert bad_count("receipts", "message") - before == 1
    assert ReceiptPoller(world.settings, world.db, sender).poll_once() == {}


def test_a_chunk_expo_refuses_does_not_block_the_other_receipts(world, sender) -> None:
    ids = _sent(world, ["r1", "r2", "r3"])
    poison = dict(world.message(ids[0]), _id="poison", label="other", ticketId="poison-ticket")
    world.db[dbm.MESSAGES].insert_one(poison)
    refusing = RefusingSender(sender, poison="poison-ticket")

    counts = ReceiptPoller(world.settings, world.db, refusing).poll_once()  # type: ignore[arg-type]

    assert counts == {"ok": 3, "refused": 1}
    assert {world.message(i)["receipt"]["state"] for i in ids} == {"ok"}
    receipt = world.message("poison")["receipt"]
    assert receipt["state"] == "unknown" and "refused" in receipt["reason"]
    assert ReceiptPoller(world.settings, world.db, refusing).poll_once() == {}  # type: ignore[arg-type]


def test_a_project_level_refusal_blames_no_ticket(world, sender) -> None:
    ids = _sent(world, ["p1", "p2"])
    refusing = RefusingSender(sender, refuse_all=True)
    with pytest.raises(PermanentError, match="UNAUTHORIZED"):
        ReceiptPoller(world.settings, world.db, refusing).poll_once()  # type: ignore[arg-type]
    assert refusing.requests <= 2  # the chunk, then one probe: no ticket-by-ticket search
    assert {world.message(i)["receipt"]["state"] for i in ids} == {"pending"}


# -- the consumer --------------------------------------------------------------------------------
def test_a_bad_user_document_ends_its_message_and_the_wakeup_goes_on(world: World) -> None:
    dlq = world.dead_letters()
    m = world.manager()
    world.user("ok-user", manager=m)
    world.user("bad-user", manager=m)
    docs = world.due_messages(["ok-user", "bad-user"], in_seconds(4), planner=m.planner)
    ids = {d["userId"]: d["_id"] for d in docs}
    # Changed after planning, so the consumer rechecks the user in full: and finds junk.
    world.db[dbm.USERS].update_one({"_id": "bad-user"}, {"$set": {"prefs.quietHours": ["22:00"]}})
    creator_stores(world.db).changes.record(["bad-user"], utcnow())
    before = bad_count("consumer", "user")

    world.start_consumer()
    wait_for(lambda: world.all_terminal(list(ids.values())), 25, what="both terminal")

    assert world.message(ids["ok-user"])["status"] == "success"
    bad = world.message(ids["bad-user"])
    assert bad["status"] == "failed"
    assert bad["reason"].startswith("bad document:") and "quietHours" in bad["reason"]
    assert world.pushes_to("ExponentPushToken[bad-user]") == []
    assert bad_count("consumer", "user") - before == 1
    assert dlq.empty()


def test_a_bug_in_the_intent_check_releases_the_guards_it_took(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    dlq = world.dead_letters()
    world.user("g1")
    world.user("g2")
    ids = [d["_id"] for d in world.due_messages(["g1", "g2"], in_seconds(3))]
    real = IntentCheck.judge

    def broken(
        self: IntentCheck, w: Any, items: Any, now: Any, changed: Any, caps: bool = True
    ) -> Any:
        if not caps:  # the preparation's check, after the guards were taken
            raise ValueError("a bug")
        return real(self, w, items, now, changed, caps)

    monkeypatch.setattr(IntentCheck, "judge", broken)
    world.start_consumer()
    frame = dlq.get(timeout=20)
    assert "preparing" in frame.headers["tzpush-reason"]
    assert world.db[dbm.SENDS].count_documents({"_id": {"$in": ids}}) == 0
    assert set(world.statuses(ids).values()) == {"pending"}  # nothing sent; the janitor ends them


# -- tzpush doctor -------------------------------------------------------------------------------
def test_doctor_lists_the_bad_documents(world: World) -> None:
    dbm.ensure_indexes(world.db)
    world.user("fine-user")
    world.db[dbm.USERS].insert_one({"_id": "mars", "timezone": "Mars/Olympus_Mons"})
    world.db[dbm.REMINDERS].insert_one(raw_reminder("r-time", "fine-user", time="8:00"))
    checks = {c.name: c for c in run_checks(world.settings)}
    docs = checks["documents"]
    assert docs.status == "warn"
    assert "2 bad" in docs.detail
    assert "reminder r-time" in docs.detail and "'8:00'" in docs.detail
    assert "user mars" in docs.detail and "Mars/Olympus_Mons" in docs.detail
    assert docs.fix


def test_doctor_is_quiet_about_sound_documents(world: World) -> None:
    dbm.ensure_indexes(world.db)
    world.user("fine-user")
    checks = {c.name: c for c in run_checks(world.settings)}
    assert checks["documents"].status == "ok"


# -- a change of a reminder written by hand ------------------------------------------------------
def test_a_change_of_a_reminder_written_by_hand_without_a_field_is_refused_with_a_message(
    world: World,
) -> None:
    """The CLI's ``reminders update`` and the API's PATCH merge a change into the stored
    reminder the same way (``creator.manage.stored_content``): a field the stored document
    lacks is refused naming it, by both, not a ``KeyError`` from one of them."""
    from creator import upserts
    from shared.errors import InputError

    world.user("hand", "Europe/Berlin")
    doc = raw_reminder("hand-r", "hand")
    del doc["category"]
    world.db[dbm.REMINDERS].insert_one(doc)
    m = world.manager()
    with pytest.raises(InputError, match="category None"):
        m.update_reminder("hand-r", label="Lunch")
    from api.manage import ApiManager

    with pytest.raises(InputError, match="category None"):
        ApiManager(m.db, m.planner, m.settings).patch_reminder("hand", "hand-r", {"label": "L"})
    api = upserts.ReminderSpec(category="meal", label="x", at="12:30")  # a whole PUT is fine
    assert isinstance(upserts.put_reminder(m, "hand", "hand-r", api), upserts.Done)


# -- logins --------------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", ["token", "deviceId", "userId"])
@pytest.mark.parametrize("single", [False, True], ids=["batch", "single"])
def test_a_login_onto_a_registration_written_by_hand_without_a_field_replaces_it(
    world: World, missing: str, single: bool
) -> None:
    """An active registration written by hand without its device id, token string or user holds
    the install all the same: a login onto it deactivates it as any other holder, and neither
    that login nor its batch-mates fail (a ``KeyError``, the batch a 500, the new install
    before it written but never planned)."""
    from creator import upserts

    m = world.manager()
    world.planner().run_pass()
    soon = (utcnow() + dt.timedelta(hours=2)).strftime("%H:%M")
    for uid in ("ann", "ben"):
        m.upsert_user(uid, timezone="UTC")
        m.add_reminder(uid, category="meal", label="lunch", at=soon, title="Lunch")
    legacy = {
        "_id": "legacy",
        "userId": "old",
        "deviceId": "shared-phone",
        "token": "ExponentPushToken[legacy]",
        "isActive": True,
    }
    del legacy[missing]
    world.db[dbm.TOKENS].insert_one(legacy)
    device = "shared-phone" if missing != "deviceId" else "other-phone"
    token = "ExponentPushToken[legacy]" if missing != "token" else "ExponentPushToken[ann]"
    onto = upserts.Login("ann", device, token)
    if single:
        out = [upserts.Done(m.register_token("ann", device=device, token=token), "created")]
    else:
        out = upserts.register_tokens(
            m, [upserts.Login("ben", "ben-phone", "ExponentPushToken[b]"), onto]
        )
        assert isinstance(out[0], upserts.Done) and out[0].change == "created", out
        ben = out[0].doc["_id"]
        assert world.db[dbm.MESSAGES].count_documents({"notificationTokenId": ben}) == 1
    mine = out[-1]
    assert isinstance(mine, upserts.Done) and mine.change == "created", out
    assert world.db[dbm.MESSAGES].count_documents({"notificationTokenId": mine.doc["_id"]}) == 1
    old = world.db[dbm.TOKENS].find_one({"_id": "legacy"})
    assert old is not None and old["isActive"] is False, old
