"""Onboarding and concurrent logins pay a few database writes in all, not a few per item.

Each write is a commit on the server here (about 10 ms with its log synced on commit, and
concurrent writers queue for it), so ``creator.upserts`` writes a batch in bulk and
``api.coalesce`` groups logins that arrive together. Counted with pymongo's command monitoring.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pymongo import monitoring

from api.coalesce import Coalescer
from creator import upserts
from creator.writers.users import UserWriter
from shared.store import db as dbm

WRITES = ("insert", "update", "delete", "findAndModify")


class _Writes(monitoring.CommandListener):
    def __init__(self) -> None:
        self.on = False
        self.seen: Counter[tuple[str, ...]] = Counter()
        self.order: list[tuple[str, ...]] = []  # what was counted, in the order it was sent
        self.lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.on and event.command_name in WRITES:
            key: tuple[str, ...] = (event.command_name, str(event.command[event.command_name]))
        elif self.on and event.command_name == "find":
            first = next(iter(event.command.get("filter") or {"": 0}))
            key = ("find", str(event.command["find"]), first)
        else:
            return
        with self.lock:
            self.seen[key] += 1
            self.order.append(key)

    def succeeded(self, event: Any) -> None:
        pass

    def failed(self, event: Any) -> None:
        pass

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Count what is sent inside the block (from nothing)."""
        self.seen.clear()
        self.order.clear()
        self.on = True
        try:
            yield
        finally:
            self.on = False


_W = _Writes()
monitoring.register(_W)


def _onboarding(n: int, start: int = 0) -> list[upserts.Item]:
    items: list[upserts.Item] = []
    for i in range(start, start + n):
        uid = f"u{i}"
        items.append(upserts.UserChange(uid, timezone="Asia/Tashkent"))
        items.append(upserts.Login(uid, f"phone-{i}", f"ExponentPushToken[t{i}]"))
        items.append(
            upserts.ReminderPut(uid, f"{uid}-lunch", upserts.ReminderSpec("meal", "lunch", "12:30"))
        )
        items.append(
            upserts.ReminderPut(
                uid, f"{uid}-pill", upserts.ReminderSpec("medication", "pill", "18:05")
            )
        )
    return items


def test_an_onboarding_batch_is_a_few_writes(world):
    m = world.manager()
    world.planner().run_pass()  # a planned window: the batch's messages are written at once too
    with _W.recording():
        out = upserts.apply(m, _onboarding(100))
    assert all(isinstance(o, upserts.Done) for o in out)
    assert world.db[dbm.MESSAGES].count_documents({}) == 200  # each reminder once today
    writes = sum(n for key, n in _W.seen.items() if key[0] in WRITES)
    # users, tokens, reminders, messages (one insert each); the planner's own bookkeeping.
    assert writes <= 8, dict(_W.seen)


def test_logins_that_arrive_together_are_written_together(world):
    m = world.manager()
    world.planner().run_pass()
    upserts.apply(m, [upserts.UserChange(f"u{i}", timezone="Europe/Berlin") for i in range(40)])
    logins = Coalescer(lambda batch: upserts.register_tokens(m, batch), name="test-logins")
    gate = threading.Barrier(40)
    answers: list[Any] = []

    def client(i: int) -> None:
        gate.wait()
        answers.append(
            logins.submit(upserts.Login(f"u{i}", f"d{i}", f"ExponentPushToken[{i}]")).result(30)
        )

    try:
        with _W.recording():
            threads = [threading.Thread(target=client, args=(i,)) for i in range(40)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        logins.close()
    assert len(answers) == 40 and all(isinstance(a, upserts.Done) for a in answers)
    inserts = _W.seen[("insert", dbm.TOKENS)]
    assert inserts < 20, f"40 logins took {inserts} token inserts"
    assert world.db[dbm.TOKENS].count_documents({"isActive": True}) == 40


def test_a_batch_that_turns_a_user_off_stops_what_was_planned_for_them(world):
    """Settings changed in a batch are stamped in the change log: a consumer rechecks the user at
    send time instead of trusting the wake-up's snapshot (planned while they were on)."""
    import datetime as dt

    from shared.clock import utcnow
    from tests.integration.consumer_support import in_seconds
    from tests.integration.harness import wait_for

    m = world.manager()
    world.user("dora", manager=m)
    world.db[dbm.CHANGES].update_one(
        {"_id": "dora"}, {"$set": {"at": utcnow() - dt.timedelta(days=1)}}, upsert=True
    )
    msg = world.due_messages(["dora"], in_seconds(5))[0]["_id"]
    world.start_consumer()
    out = upserts.apply(m, [upserts.UserChange("dora", enabled=False)])
    assert isinstance(out[0], upserts.Done)
    wait_for(lambda: world.all_terminal([msg]), 30, what="the message to end")
    doc = world.message(msg)
    assert doc["status"] == "cancelled", doc
    assert world.pushes_to("ExponentPushToken[dora]") == []


def test_a_cli_login_cut_before_its_planning_is_planned_when_sent_again(world):
    """``tzpush tokens register`` (``Manager.register_token``): the registration is written, the
    planning fails (the database went away exactly then), the operator runs it again: the
    second run finds the registration stored and must still plan it."""
    import pytest

    from shared.errors import TransientError

    m = world.manager()
    world.planner().run_pass()
    m.upsert_user("hal", timezone="Asia/Tashkent")
    m.add_reminder("hal", category="meal", label="lunch", at="12:30")
    real = m.planner.plan_users
    calls = {"n": 0}

    def cut(user_ids: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise TransientError("database unavailable (injected)")
        return real(user_ids, **kw)

    m.planner.plan_users = cut  # type: ignore[method-assign]
    with pytest.raises(TransientError):
        m.register_token("hal", device="phone", token="ExponentPushToken[hal]")
    m.register_token("hal", device="phone", token="ExponentPushToken[hal]")
    token = world.db[dbm.TOKENS].find_one({"deviceId": "phone", "isActive": True})
    assert token is not None
    planned = world.db[dbm.MESSAGES].count_documents({"notificationTokenId": token["_id"]})
    assert planned == 1, "the login sent again left its device unplanned"


def test_a_login_arms_only_its_own_devices_messages(world):
    """A new device is planned alone: the user's other device keeps what it has, nothing of it
    is inserted or armed again (before: every login re-planned all of the user's devices, the
    duplicates refused one by one and their wake-ups sent again)."""
    m = world.manager()
    world.planner().run_pass()
    world.user("ivy", device="old-phone", token="ExponentPushToken[ivy-old]", manager=m)
    m.add_reminder("ivy", category="meal", label="lunch", at="12:30")
    m.add_reminder("ivy", category="medication", label="pill", at="18:05")
    armed: list[str] = []
    real = m.planner.wakeups.arm

    def publish(docs: Any, **kw: Any) -> Any:
        docs = list(docs)
        armed.extend(d["notificationTokenId"] for d in docs)
        return real(docs, **kw)

    m.planner.wakeups.arm = publish  # type: ignore[method-assign]
    new = m.register_token("ivy", device="new-phone", token="ExponentPushToken[ivy-new]")
    assert armed and set(armed) == {new["_id"]}, armed
    out = upserts.register_tokens(m, [upserts.Login("ivy", "tab", "ExponentPushToken[ivy-tab]")])
    assert isinstance(out[0], upserts.Done)
    assert set(armed) == {new["_id"], out[0].doc["_id"]}, armed
    assert len(armed) == 4  # two reminders on each new device, once


def test_a_batch_plans_its_new_users_from_what_it_wrote_and_nothing_slips_between(world):
    """New users are inserted last and planned from the documents the call holds (no read of
    their reminders and tokens back). That is only sound because nothing can be attached to a
    user who does not exist yet: a login for them while the batch runs is refused (404), and
    once the batch is in, a login plans its device against the batch's reminders."""
    import pytest

    from shared.errors import NotFoundError

    m = world.manager()
    world.planner().run_pass()
    raced: list[BaseException] = []
    real = UserWriter.insert_many

    def insert_users(*args: Any, **kw: Any) -> Any:
        try:  # another caller logs the new user in just before the users go in
            m.register_token("u0", device="racer", token="ExponentPushToken[racer]")
        except NotFoundError as exc:
            raced.append(exc)
        return real(*args, **kw)

    UserWriter.insert_many = insert_users  # type: ignore[method-assign]
    try:
        with _W.recording():
            out = upserts.apply(m, _onboarding(3))
    finally:
        UserWriter.insert_many = real  # type: ignore[method-assign]
    assert all(isinstance(o, upserts.Done) for o in out)
    assert len(raced) == 1, "a login for a user not yet inserted must be refused"
    # Planned without reading back the reminders and registrations the batch wrote.
    assert ("find", dbm.REMINDERS, "userId") not in _W.seen, dict(_W.seen)
    assert ("find", dbm.TOKENS, "userId") not in _W.seen, dict(_W.seen)
    assert world.db[dbm.MESSAGES].count_documents({"userId": "u0"}) == 2
    racer = m.register_token("u0", device="racer", token="ExponentPushToken[racer]")
    assert world.db[dbm.MESSAGES].count_documents({"notificationTokenId": racer["_id"]}) == 2
    with pytest.raises(NotFoundError):
        m.register_token("nobody", device="x", token="ExponentPushToken[x]")


def test_logins_are_planned_from_the_registrations_they_wrote_and_the_user_read_after(world):
    """A batch of logins plans each new device from the registration it has just written (no read
    of the user's registrations back), but reads the user and the reminders after that write: a
    zone or reminder change made meanwhile plans every registration it reads, so the write before
    each read makes sure one of the two sees the other."""
    m = world.manager()
    world.planner().run_pass()
    users = [upserts.UserChange(f"u{i}", timezone="Asia/Tashkent") for i in range(5)]
    lunch = upserts.ReminderSpec("meal", "lunch", "12:30")
    upserts.apply(m, [*users, *(upserts.ReminderPut(f"u{i}", f"r{i}", lunch) for i in range(5))])
    logins = [upserts.Login(f"u{i}", f"d{i}", f"ExponentPushToken[{i}]") for i in range(5)]
    with _W.recording():
        out = upserts.register_tokens(m, logins)
    assert all(isinstance(o, upserts.Done) and o.change == "created" for o in out), out
    assert ("find", dbm.TOKENS, "userId") not in _W.seen, dict(_W.seen)
    order = [key[:2] for key in _W.order]
    between = order[order.index(("insert", dbm.TOKENS)) + 1 : order.index(("insert", dbm.MESSAGES))]
    assert ("find", dbm.USERS) in between and ("find", dbm.REMINDERS) in between, order
    for i in range(5):
        token = out[i].doc["_id"]  # type: ignore[union-attr]
        assert world.db[dbm.MESSAGES].count_documents({"notificationTokenId": token}) == 1


def test_the_check_for_users_erased_meanwhile_reads_nothing_more_for_a_login(world):
    """A login batch of users with reminders reads its users three times: the batch's own read,
    the planning's, and the planning's look after its insert, which also serves the check for
    users erased meanwhile (``ErasureWriter.undo_if_erased``)."""
    m = world.manager()
    world.planner().run_pass()
    upserts.apply(m, _onboarding(10))  # users with reminders: a login plans messages
    logins = [
        upserts.Login(f"u{i}", f"tablet-{i}", f"ExponentPushToken[tab{i}]") for i in range(10)
    ]
    with _W.recording():
        out = upserts.register_tokens(m, logins)
    assert all(isinstance(o, upserts.Done) and o.change == "created" for o in out), out
    assert _W.seen[("insert", dbm.MESSAGES)] == 1
    assert _W.seen[("find", dbm.USERS, "_id")] == 3, dict(_W.seen)


def test_logins_of_new_installs_look_nothing_up_and_the_others_still_find_what_they_replace(world):
    """A login is inserted first: the unique indexes (one active registration per device id and
    per token string) refuse only a login whose device or token string is held already, and only
    those look up what holds them. A batch of new installs (the usual login) reads no
    registration; in a batch with the other cases each still ends as a login alone would."""
    m = world.manager()
    world.planner().run_pass()
    upserts.apply(m, _onboarding(6))  # u0..u5, each with device d<i>
    held = {d["userId"]: d for d in world.db[dbm.TOKENS].find({"isActive": True, "userId": "u1"})}[
        "u1"
    ]
    fresh = [upserts.Login(f"u{i}", f"new-{i}", f"ExponentPushToken[new{i}]") for i in range(6)]
    with _W.recording():
        out = upserts.register_tokens(m, fresh)
    assert all(isinstance(o, upserts.Done) and o.change == "created" for o in out), out
    looked = {k: n for k, n in _W.seen.items() if k[:2] == ("find", dbm.TOKENS)}
    assert not looked, f"new installs looked registrations up: {looked}"

    again = fresh[0]  # the same login sent again
    passed = upserts.Login("u2", held["deviceId"], held["token"])  # u1's install, now u2's
    moved = upserts.Login("u3", "new-3b", "ExponentPushToken[new3]")  # u3's token, new device id
    rotated = upserts.Login("u4", "new-4", "ExponentPushToken[new4-rotated]")  # new token
    new = upserts.Login("u5", "new-5b", "ExponentPushToken[new5b]")
    out = upserts.register_tokens(m, [again, passed, moved, rotated, new])
    assert [(type(o).__name__, getattr(o, "change", None)) for o in out] == [
        ("Done", "unchanged"),
        ("Done", "created"),
        ("Done", "created"),
        ("Done", "created"),
        ("Done", "created"),
    ], out
    tokens = world.db[dbm.TOKENS]
    old = tokens.find_one({"_id": held["_id"]})
    assert old is not None and old["isActive"] is False and "replaced" in old["deactivationReason"]
    for field in ("deviceId", "token"):
        pairs = Counter(d[field] for d in tokens.find({"isActive": True}))
        assert max(pairs.values()) == 1, pairs
    active = {(d["userId"], d["deviceId"], d["token"]) for d in tokens.find({"isActive": True})}
    assert ("u2", held["deviceId"], held["token"]) in active
    assert ("u3", "new-3b", "ExponentPushToken[new3]") in active
    assert ("u4", "new-4", "ExponentPushToken[new4-rotated]") in active
    assert ("u5", "new-5b", "ExponentPushToken[new5b]") in active
    for o in out:  # every registration answered is the one stored, and planned
        doc = o.doc  # type: ignore[union-attr]
        assert tokens.find_one({"_id": doc["_id"], "isActive": True}) is not None, doc
        assert world.db[dbm.MESSAGES].count_documents({"notificationTokenId": doc["_id"]}) >= 1
    assert not any(d == "new-3" or t == "ExponentPushToken[new4]" for _, d, t in active)
