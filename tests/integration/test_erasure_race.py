"""An erasure that runs while a planning holds the user's documents leaves nothing of theirs.

A pass (or a login's planning) reads a user, the user is erased, then the planning inserts the
messages it planned from what it read: the erasure's own sweep of the messages ran before that
insert and never saw them. They would keep the erased user's id, text, token and zone for good
(the consumer cancels them at send, "user no longer exists", but does not anonymise them). The
planning looks after its inserts for users erased meanwhile and ends what it wrote for them as
the erasure does; a pass killed before that look leaves it to the pass that plans its window
again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from creator.accounts import erase_user
from creator.manage import Manager
from creator.planner import PassReport, Planner
from creator.writers import batch
from creator.writers import reminders as reminder_writer
from creator.writers.users import UserWriter
from creator.writers.versions import ReminderVersions
from shared.domain.plan import Doc
from shared.store import db as dbm
from shared.store.mongo.accounts import MongoErasure
from tests.integration.harness import World

SCRUBBED = ("title", "body", "data", "label", "token", "timezone")


class Killed(Exception):
    pass


def _seed(world: World) -> None:
    m = world.manager()
    for uid, tz in [("tash", "Asia/Tashkent"), ("berlin", "Europe/Berlin")]:
        world.user(uid, tz, manager=m)
        m.add_reminder(
            uid, category="medication", label="Citramon", at="18:00", offset_minutes=5,
            title="Citramon", body="Time to take it",
        )  # fmt: skip


def _erase_and_create_again(
    m: Manager, *, device: bool = True, reminder: bool = False
) -> dict[str, str]:
    """Erase ``tash`` and create them again under the same id (same zone): a new device
    (``new-phone``) and, if asked, a lunch reminder, each planned at once. Returns the new ids
    (``reg``, ``rem``)."""
    erase_user(m, "tash")
    m.upsert_user("tash", timezone="Asia/Tashkent")
    new: dict[str, str] = {}
    if device:
        reg = m.register_token("tash", device="new-phone", token="ExponentPushToken[new-phone]")
        new["reg"] = str(reg["_id"])
    if reminder:
        rem = m.add_reminder("tash", category="meal", label="lunch", at="12:30", title="Lunch")
        new["rem"] = str(rem["_id"])
    return new


def _before_first(
    action: Callable[[], object], real: Callable[..., Any], fired: list[bool]
) -> Callable[..., Any]:
    """``real``, with ``action`` run once just before its first call: where a test injects a
    race (``fired`` records that it ran). A plain function: patched on a class, still bound."""

    def step(*a: Any, **kw: Any) -> Any:
        if not fired:
            fired.append(True)
            action()
        return real(*a, **kw)

    return step


class ErasedMidway(Planner):
    """A planning whose first insert comes after an erasure of ``victim`` (it read them before);
    ``die``: killed right after that insert, before anything else."""

    victim = "tash"  # the one _erase_and_create_again creates again
    die = False
    recreate = False  # the user created again under the same id right after the erasure
    eraser_behind = dt.timedelta(0)  # how far behind the erasing process's clock is

    def __init__(self, *args: Any, world: World, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.world = world
        self.erased = False
        self._real_insert = self.inserter.insert
        self.inserter.insert = self._insert  # type: ignore[method-assign]

    def _insert(
        self, docs: list[Doc], report: PassReport, fresh: set[str] | None = None
    ) -> list[Doc]:
        if not self.erased and any(d["userId"] == self.victim for d in docs):
            self.erased = True
            eraser = self.world.manager()
            eraser.planner.clock = lambda: dt.datetime.now(dt.UTC) - self.eraser_behind
            if self.recreate:
                _erase_and_create_again(eraser)
            else:
                erase_user(eraser, self.victim)
            out = self._real_insert(docs, report, *([] if fresh is None else [fresh]))
            if self.die:
                raise Killed("killed after the insert")
            return out
        return self._real_insert(docs, report, *([] if fresh is None else [fresh]))


def _nothing_left_of(world: World, user_id: str) -> None:
    messages = world.db[dbm.MESSAGES]
    assert messages.count_documents({"userId": user_id}) == 0, list(
        messages.find({"userId": user_id})
    )
    erased = list(messages.find({"erasedAt": {"$exists": True}}))
    assert erased, "the messages planned for the erased user are gone from the count"
    for doc in erased:
        assert doc["status"] == "cancelled" and doc["reason"] == "user erased", doc
        assert all(doc.get(k) is None for k in SCRUBBED), doc
    others = list(messages.find({"userId": "berlin"}))
    assert others and all(d["status"] == "pending" for d in others)


def test_a_pass_that_read_a_user_before_their_erasure_leaves_nothing_of_theirs(
    world: World,
) -> None:
    _seed(world)
    planner = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    planner.run_pass()
    assert planner.erased
    _nothing_left_of(world, "tash")


def test_a_pass_that_read_a_user_erased_and_created_again_since_leaves_nothing_of_theirs(
    world: World,
) -> None:
    """A pass reads a user and their reminders; the user is erased and created again under the
    same id (a new device) before the pass inserts. The user exists at the pass's look, so it
    kept what it planned from the erased person: their reminder's text and their token, pending
    under the new user. The look compares the user the pass read with the one it finds."""
    _seed(world)
    planner = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    planner.recreate = True
    planner.run_pass()
    assert planner.erased
    assert [t["deviceId"] for t in world.db[dbm.TOKENS].find({"userId": "tash"})] == ["new-phone"]
    _nothing_left_of(world, "tash")


@pytest.mark.parametrize("behind_s", [0, 10], ids=["same-clock", "eraser-10s-behind"])
def test_a_pass_killed_after_inserting_for_an_erased_user_leaves_it_to_the_next(
    world: World, behind_s: int
) -> None:
    """The erasure may run in another process whose clock is behind the creator's (the change
    log allows 30 s): its stamp is then earlier than the dead pass's start."""
    _seed(world)
    dying = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    dying.die = True
    dying.eraser_behind = dt.timedelta(seconds=behind_s)
    with pytest.raises(Killed):
        dying.run_pass()
    assert world.db[dbm.MESSAGES].count_documents({"userId": "tash"}) > 0  # left behind
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)
    # Change-log entries written by hand with ids that are no user ids must not stop the pass.
    world.db[dbm.CHANGES].insert_many([{"_id": 5, "at": later}, {"_id": {"u": "x"}, "at": later}])
    world.planner(clock=lambda: later).run_pass()
    _nothing_left_of(world, "tash")


def test_a_login_planned_from_a_user_read_before_their_erasure_leaves_nothing_of_theirs(
    world: World,
) -> None:
    _seed(world)
    world.planner().run_pass()  # a window planned: a login is planned at once
    planner = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    m = world.manager()
    m.planner = planner
    from shared.errors import NotFoundError

    with pytest.raises(NotFoundError):  # erased meanwhile: its registration is deleted too
        m.register_token("tash", device="tablet", token="ExponentPushToken[tablet]")
    assert planner.erased
    _nothing_left_of(world, "tash")
    assert world.db[dbm.TOKENS].count_documents({"userId": "tash"}) == 0


def test_a_login_planned_from_a_user_erased_and_created_again_meanwhile_leaves_nothing(
    world: World,
) -> None:
    """A login's planning reads the user and their reminders; the user is erased and created
    again under the same id (a new device) before the planning inserts. What it planned from
    the erased person's reminders, for the login's registration, is under the new user: it must
    be ended and anonymised (the user found has another ``createdAt`` than the one read), and
    the login's registration deleted (404). The new user's registration stays."""
    _seed(world)
    world.planner().run_pass()
    planner = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    planner.recreate = True
    m = world.manager()
    m.planner = planner
    from shared.errors import NotFoundError

    with pytest.raises(NotFoundError):
        m.register_token("tash", device="tablet", token="ExponentPushToken[tablet]")
    assert planner.erased
    assert [t["deviceId"] for t in world.db[dbm.TOKENS].find({"userId": "tash"})] == ["new-phone"]
    assert world.db[dbm.MESSAGES].count_documents({"userId": "tash"}) == 0
    assert world.db[dbm.MESSAGES].count_documents({"title": "Citramon", "userId": "tash"}) == 0
    ended = list(world.db[dbm.MESSAGES].find({"erasedAt": {"$exists": True}}))
    assert ended and all(d["status"] == "cancelled" and d["token"] is None for d in ended)


def _recreated_after_the_look(world: World, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the backend create ``tash`` again (same id, a new device and a new reminder, planned
    at once) right after the planner's look has found them gone; the new reminder's id is put
    in the list returned once that happened."""
    real = MongoErasure.incarnations
    recreated: list[str] = []

    def looked_then_recreated(store: MongoErasure, user_ids: Any) -> dict[str, Any]:
        found = real(store, user_ids)
        if "tash" in user_ids and "tash" not in found and not recreated:
            m = world.manager()
            m.upsert_user("tash", timezone="Asia/Tashkent")
            m.register_token("tash", device="new-phone", token="ExponentPushToken[new-phone]")
            new = m.add_reminder(
                "tash", category="medication", label="Vitamin D", at="09:00", title="Vitamin D"
            )
            recreated.append(new["_id"])
        return found

    monkeypatch.setattr(MongoErasure, "incarnations", looked_then_recreated)
    return recreated


def _the_new_user_kept_theirs(world: World, recreated: list[str]) -> None:
    assert recreated
    mine = list(world.db[dbm.MESSAGES].find({"userId": "tash"}))
    assert mine and all(d["reminderId"] == recreated[0] for d in mine), mine
    assert all(d["status"] == "pending" and d["title"] == "Vitamin D" for d in mine), mine
    old = list(world.db[dbm.MESSAGES].find({"erasedAt": {"$exists": True}}))
    assert old and all(d["status"] == "cancelled" and d["title"] is None for d in old), old


def test_a_user_recreated_under_the_same_id_meanwhile_keeps_their_new_messages(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the pass's look (the user is gone) and its sweep, the backend creates the user
    again under the same id, with a new reminder planned at once: the sweep ends only what the
    pass inserted for the erased user, not the new user's messages."""
    _seed(world)
    recreated = _recreated_after_the_look(world, monkeypatch)
    ErasedMidway(world.db, world.broker(), world.settings, world=world).run_pass()
    _the_new_user_kept_theirs(world, recreated)


def test_a_user_recreated_before_the_sweep_of_a_dead_window_keeps_their_new_messages(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass that plans a dead pass's window again finds the erased user gone; before its
    sweep, the backend creates the user again under the same id and a new reminder is planned
    at once. The sweep ends only what was planned before that pass began."""
    _seed(world)
    dying = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    dying.die = True
    with pytest.raises(Killed):
        dying.run_pass()
    recreated = _recreated_after_the_look(world, monkeypatch)
    world.planner().run_pass()
    _the_new_user_kept_theirs(world, recreated)


@pytest.mark.parametrize("meanwhile", ["pending", "ended"])
def test_a_user_erased_and_recreated_before_a_dead_window_is_planned_again_loses_the_old_ones(
    world: World, meanwhile: str
) -> None:
    """A pass killed after inserting for a user erased meanwhile; the backend then creates the
    user again under the same id (a new device, a new reminder) before the window is planned
    again. The user exists, so the pass that takes the window over did not sweep them, and their
    registrations then were deleted, not turned off: what the dead pass planned from the erased
    person stayed pending under the new user, with the old text and token, to end cancelled at
    send or ``is_missed``, never anonymised. It must be ended and anonymised as the erasure
    does, and the new user's messages kept."""
    _seed(world)
    dying = ErasedMidway(world.db, world.broker(), world.settings, world=world)
    dying.die = True
    with pytest.raises(Killed):
        dying.run_pass()
    left = [d["_id"] for d in world.db[dbm.MESSAGES].find({"userId": "tash"})]
    assert left  # what the dead pass inserted for the erased person
    if meanwhile == "ended":  # a janitor past grace, or a change of a reminder id used again
        world.db[dbm.MESSAGES].update_many(
            {"_id": {"$in": left}}, {"$set": {"status": "is_missed", "reason": "missed"}}
        )
    m = world.manager()
    m.upsert_user("tash", timezone="Asia/Tashkent")
    m.register_token("tash", device="new-phone", token="ExponentPushToken[new-phone]")
    new = m.add_reminder(
        "tash", category="medication", label="Vitamin D", at="09:00", title="Vitamin D"
    )
    world.planner().run_pass()
    _the_new_user_kept_theirs(world, [new["_id"]])
    old = {d["_id"]: d for d in world.db[dbm.MESSAGES].find({"_id": {"$in": left}})}
    assert all(d["status"] == "cancelled" and d["reason"] == "user erased" for d in old.values())
    assert all(d["userId"].startswith("erased-") and d["token"] is None for d in old.values())
    assert all(d["title"] is None for d in old.values())


def _create_racing(
    world: World, monkeypatch: pytest.MonkeyPatch, path: str, action: Callable[[], object]
) -> None:
    """The creation ``path`` for ``tash`` (a login or a reminder, through the API's batch or
    the CLI), with ``action`` run just before its insert: it must be answered 404."""
    from creator import upserts
    from shared.errors import NotFoundError
    from shared.store import db as store_db
    from shared.store import tokens as tokens_mod

    m, fired = world.manager(), list[bool]()
    spec = upserts.ReminderSpec("medication", "Vitamin D", "09:00", title="Vitamin D")
    if path in ("api login", "batch reminder"):
        hooked = _before_first(action, store_db.insert_refused, fired)
        monkeypatch.setattr(store_db, "insert_refused", hooked)
        item: upserts.Item = (
            upserts.Login("tash", "tablet", "ExponentPushToken[tablet]")
            if path == "api login"
            else upserts.ReminderPut("tash", "tash-vitamin", spec)
        )
        out = upserts.apply(m, [item])
        assert isinstance(out[0], NotFoundError), out
    elif path == "cli login":
        hooked = _before_first(action, tokens_mod.new_registration, fired)
        monkeypatch.setattr(tokens_mod, "new_registration", hooked)
        with pytest.raises(NotFoundError):
            m.register_token("tash", device="tablet", token="ExponentPushToken[tablet]")
    else:
        hooked = _before_first(action, reminder_writer.new_reminder, fired)
        monkeypatch.setattr(reminder_writer, "new_reminder", hooked)
        with pytest.raises(NotFoundError):
            m.add_reminder(
                "tash", category="medication", label="Vitamin D", at="09:00", title="Vitamin D"
            )
    assert fired


CREATIONS = ["api login", "batch reminder", "cli login", "cli reminder"]


@pytest.mark.parametrize("path", CREATIONS)
def test_a_creation_for_a_user_erased_meanwhile_leaves_nothing_of_theirs(
    world: World, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A login or a new reminder reads its user, the user is erased in full, then the creation
    inserts: the erasure's sweep ran before and never saw it. An active registration with the
    erased person's token (or a reminder with their text) stayed, orphaned, and a user created
    again under the same id inherited it: pushes to the old person's device. The creation must
    look after its insert, delete what it wrote and answer 404."""
    _seed(world)
    world.planner().run_pass()  # a window planned: a creation is planned at once
    eraser = world.manager()
    _create_racing(world, monkeypatch, path, lambda: erase_user(eraser, "tash"))
    assert world.db[dbm.USERS].count_documents({"_id": "tash"}) == 0
    assert list(world.db[dbm.TOKENS].find({"userId": "tash"})) == []
    assert list(world.db[dbm.REMINDERS].find({"userId": "tash"})) == []
    assert list(world.db[dbm.MESSAGES].find({"userId": "tash"})) == []


@pytest.mark.parametrize("path", CREATIONS)
def test_a_creation_for_a_user_erased_and_created_again_meanwhile_leaves_nothing_of_theirs(
    world: World, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """As above, but the backend creates the user again under the same id (a new device, a new
    reminder) before the creation inserts. The user exists at the creation's look, so it kept
    what it wrote: the erased person's token as an active registration of the new user (their
    reminders pushed to the old person's device), or the erased person's reminder planned for
    the new user's device. The creation must compare the user it read with the one it finds
    (``createdAt``), delete what it wrote, end and anonymise what was planned from it, answer
    404, and leave the new user's own documents and messages as they are."""
    _seed(world)
    world.planner().run_pass()  # a window planned: a creation is planned at once
    other = world.manager()
    new: dict[str, str] = {}
    _create_racing(
        world, monkeypatch, path, lambda: new.update(_erase_and_create_again(other, reminder=True))
    )
    regs = list(world.db[dbm.TOKENS].find({"userId": "tash"}))
    assert [str(t["_id"]) for t in regs] == [new["reg"]], regs
    rems = list(world.db[dbm.REMINDERS].find({"userId": "tash"}))
    assert [str(r["_id"]) for r in rems] == [new["rem"]], rems
    mine = list(world.db[dbm.MESSAGES].find({"userId": "tash"}))
    assert mine, "the new user's own reminder is planned for their own device"
    for d in mine:
        assert (str(d["notificationTokenId"]), str(d["reminderId"])) == (new["reg"], new["rem"])
        assert d["status"] == "pending" and d["title"] == "Lunch", d
    assert not list(world.db[dbm.MESSAGES].find({"token": "ExponentPushToken[tablet]"}))
    assert not list(world.db[dbm.MESSAGES].find({"title": "Vitamin D"}))


def test_a_batch_that_changes_its_user_and_logs_in_notices_the_user_created_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch ``[user change, login]`` reads the user, who is then erased and created again;
    the batch's user change writes onto the new user and reads it back. The login must still
    be compared with the user the batch read first, not with the one its own write read back:
    else the erased person's device stays registered under the new user."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    world.planner().run_pass()
    m, other = world.manager(), world.manager()
    done: list[bool] = []
    again = _before_first(
        lambda: _erase_and_create_again(other, device=False, reminder=True),
        UserWriter._update_many,
        done,
    )
    monkeypatch.setattr(UserWriter, "_update_many", again)
    out = upserts.apply(
        m,
        [
            upserts.UserChange("tash", enabled=True),
            upserts.Login("tash", "tablet", "ExponentPushToken[tablet]"),
        ],
    )
    assert done
    assert isinstance(out[1], NotFoundError), out
    assert world.db[dbm.TOKENS].count_documents({"userId": "tash"}) == 0
    assert not list(world.db[dbm.MESSAGES].find({"token": "ExponentPushToken[tablet]"}))


def test_a_put_that_retries_after_the_user_was_created_again_does_not_take_on_the_new_user(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PUT of a reminder reads its user; the user is erased and created again, and the new
    user PUTs the same reminder id first. The first PUT's insert then loses the race and it
    starts over: the user it reads again is another one, so it is a 404, not the erased
    person's reminder written over the new user's."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    world.planner().run_pass()
    m, other = world.manager(), world.manager()
    done: list[bool] = []
    theirs = upserts.ReminderSpec("meal", "lunch", "12:30", title="Lunch")

    def erase_recreate_and_put() -> None:
        _erase_and_create_again(other, device=False)
        upserts.put_reminder(other, "tash", "tash-r", theirs)

    again = _before_first(erase_recreate_and_put, reminder_writer.new_reminder, done)
    monkeypatch.setattr(reminder_writer, "new_reminder", again)
    old = upserts.ReminderSpec("medication", "Vitamin D", "09:00", title="Vitamin D")
    with pytest.raises(NotFoundError):
        upserts.put_reminder(m, "tash", "tash-r", old)
    assert done
    stored = world.db[dbm.REMINDERS].find_one({"_id": "tash-r"})
    assert stored is not None and stored["title"] == "Lunch", stored
    assert not list(world.db[dbm.MESSAGES].find({"title": "Vitamin D"}))


@pytest.mark.parametrize("path", ["cli", "batch"])
def test_a_change_of_a_user_erased_meanwhile_does_not_bring_back_a_user_without_a_zone(
    world: World, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A change of some settings (no time zone: the user exists) reads the user, who is then
    erased; its write was an upsert, which created a user document with only those settings:
    no time zone, which no request may create. It is a 404 now, and no user is left."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    other = world.manager()
    if path == "cli":
        real = UserWriter.sets

        def erase_after(self: Any, *a: Any, **kw: Any) -> Any:
            sets = real(self, *a, **kw)
            erase_user(other, "tash")
            return sets

        monkeypatch.setattr(UserWriter, "sets", erase_after)
        with pytest.raises(NotFoundError):
            world.manager().upsert_user("tash", enabled=False)
    else:
        erase = _before_first(lambda: erase_user(other, "tash"), UserWriter._update_many, [])
        monkeypatch.setattr(UserWriter, "_update_many", erase)
        out = upserts.apply(world.manager(), [upserts.UserChange("tash", enabled=False)])
        assert isinstance(out[0], NotFoundError), out
    assert world.db[dbm.USERS].find_one({"_id": "tash"}) is None


def test_a_batch_change_applied_alone_at_the_end_notices_the_user_created_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's change of an existing reminder is applied at the end by its single call
    (``put_reminder``), which reads the user itself. The user was erased and created again
    after the batch read them: the erasure deleted the reminder, and the single call created it
    again, with the erased person's text, under the new user. It must compare with the user
    the batch read first: a 404."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    world.planner().run_pass()
    rid = world.db[dbm.REMINDERS].find_one({"userId": "tash"})["_id"]
    m, other = world.manager(), world.manager()
    done: list[bool] = []
    again = _before_first(lambda: _erase_and_create_again(other), UserWriter.insert_many, done)
    monkeypatch.setattr(UserWriter, "insert_many", again)
    spec = upserts.ReminderSpec("medication", "Citramon", "18:30", title="Citramon, later")
    out = upserts.apply(m, [upserts.ReminderPut("tash", rid, spec)])
    assert done
    assert isinstance(out[0], NotFoundError), out
    assert world.db[dbm.REMINDERS].count_documents({"userId": "tash"}) == 0
    assert world.db[dbm.MESSAGES].count_documents({"userId": "tash"}) == 0


def test_a_batch_that_creates_its_erased_user_again_keeps_its_login(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch ``[user with a zone, login]`` reads the user, who is then erased: the batch's own
    user item creates them again (a PUT after the DELETE), and its login belongs to that user,
    as the same two requests sent one after the other would: both answered, not the user
    "changed" and the login a 404."""
    from creator import upserts

    _seed(world)
    world.planner().run_pass()
    m, other = world.manager(), world.manager()
    done: list[bool] = []
    erase = _before_first(lambda: erase_user(other, "tash"), UserWriter._update_many, done)
    monkeypatch.setattr(UserWriter, "_update_many", erase)
    out = upserts.apply(
        m,
        [
            upserts.UserChange("tash", timezone="Asia/Tashkent"),
            upserts.Login("tash", "tablet", "ExponentPushToken[tablet]"),
        ],
    )
    assert done
    assert [type(o).__name__ for o in out] == ["Done", "Done"], out
    assert out[0].change == "created"
    regs = list(world.db[dbm.TOKENS].find({"userId": "tash", "isActive": True}))
    assert [t["deviceId"] for t in regs] == ["tablet"]


def test_a_put_of_a_user_erased_between_its_write_and_its_read_back_is_a_404(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``upsert_user`` writes, then reads the user back for its answer: an erasure in between
    left it nothing to answer with (the API's PUT failed on it). It is a 404."""
    from pymongo.collection import Collection

    from shared.errors import NotFoundError

    _seed(world)
    other = world.manager()
    real = Collection.update_one
    done: list[bool] = []

    def then_erase(self: Any, *a: Any, **kw: Any) -> Any:
        out = real(self, *a, **kw)
        if self.name == dbm.USERS and not done:
            done.append(True)
            erase_user(other, "tash")
        return out

    monkeypatch.setattr(Collection, "update_one", then_erase)
    with pytest.raises(NotFoundError):
        world.manager().upsert_user("tash", timezone="Asia/Tashkent", enabled=False)
    assert done


@pytest.mark.parametrize("how", ["put", "cli update"])
def test_a_change_of_a_reminder_erased_and_put_again_by_the_new_user_does_not_land_on_theirs(
    world: World, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A change of a reminder reads it (version 1); the user is erased and created again, and
    the new user PUTs a reminder under the same id (a new document, version 1 again). The
    change's compare-and-set on the version matched the new user's reminder: the erased
    person's content was written over it, and planned for the new user's device, answered as a
    success. A change replaces only the reminder it read (its ``createdAt`` too): a 404."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    world.planner().run_pass()
    rid = world.db[dbm.REMINDERS].find_one({"userId": "tash"})["_id"]
    m, other = world.manager(), world.manager()
    done: list[bool] = []

    def recreate_and_put() -> None:
        _erase_and_create_again(other)
        upserts.put_reminder(
            other, "tash", rid, upserts.ReminderSpec("meal", "lunch", "12:30", title="Lunch")
        )

    again = _before_first(recreate_and_put, ReminderVersions.supersede, done)
    monkeypatch.setattr(ReminderVersions, "supersede", again)
    with pytest.raises(NotFoundError):
        if how == "put":
            spec = upserts.ReminderSpec("medication", "Citramon", "18:30", title="Citramon 2")
            upserts.put_reminder(m, "tash", rid, spec)
        else:
            m.update_reminder(rid, title="Citramon 2")
    assert done
    stored = world.db[dbm.REMINDERS].find_one({"_id": rid})
    assert stored is not None and stored["title"] == "Lunch" and stored["version"] == 1, stored
    assert not list(world.db[dbm.MESSAGES].find({"title": "Citramon 2"}))


def test_a_login_sent_again_for_a_user_erased_and_created_again_plans_nothing_for_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login sent again in a batch (the registration is there: "unchanged") is planned again
    from the registration it found (not read back; the CLI's single call reads the user's
    registrations again, and finds none of the old person's). The user is erased (the
    registration with them) and created again, with a reminder, before that planning: it
    planned the new user's reminder to the erased person's device, for a registration that no
    longer exists, pending under the new user.
    What it inserted is ended and anonymised, and the login is a 404."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    world.planner().run_pass()
    m, other = world.manager(), world.manager()
    done: list[bool] = []
    recreate = _before_first(
        lambda: _erase_and_create_again(other, reminder=True), batch._plan, done
    )
    monkeypatch.setattr(batch, "_plan", recreate)
    again = ("tash", "dev-tash", "ExponentPushToken[tash]")  # as _seed registered it
    out = upserts.apply(m, [upserts.Login(*again)])
    assert isinstance(out[0], NotFoundError), out
    assert done
    pending = list(world.db[dbm.MESSAGES].find({"userId": "tash"}))
    assert pending and all(d["token"] == "ExponentPushToken[new-phone]" for d in pending), pending
    assert not list(world.db[dbm.MESSAGES].find({"token": "ExponentPushToken[tash]"}))


@pytest.mark.parametrize("recreated", [False, True], ids=["erased", "erased-and-put-again"])
@pytest.mark.parametrize("revive", [False, True], ids=["changed", "re-created"])
def test_a_change_of_a_reminder_whose_user_is_erased_after_its_write_is_a_404(
    world: World, monkeypatch: pytest.MonkeyPatch, recreated: bool, revive: bool
) -> None:
    """A PUT that changes (or brings back) a reminder writes the new version, plans it, then
    reads it back for its answer. An erasure between the write and the read removed it: the
    answer was an empty document (the API's route failed on it, a 500; a batch answered the
    item "changed"). Erased, and the id put again by the user created again: the answer was
    the new person's reminder. Both are a 404, and nothing of the change is left."""
    from creator import upserts
    from shared.errors import NotFoundError

    _seed(world)
    world.planner().run_pass()
    rid = world.db[dbm.REMINDERS].find_one({"userId": "tash"})["_id"]
    m, other = world.manager(), world.manager()
    if revive:
        m.remove_reminder(rid)
    done: list[bool] = []

    def erase() -> None:
        if recreated:
            _erase_and_create_again(other)
            spec = upserts.ReminderSpec("meal", "lunch", "12:30", title="Lunch")
            upserts.put_reminder(other, "tash", rid, spec)
        else:
            erase_user(other, "tash")

    monkeypatch.setattr(m.planner, "plan_users", _before_first(erase, m.planner.plan_users, done))
    spec = upserts.ReminderSpec("medication", "Citramon", "18:30", title="Citramon 2")
    with pytest.raises(NotFoundError, match="erased while this change was applied"):
        upserts.put_reminder(m, "tash", rid, spec)
    assert done
    assert not list(world.db[dbm.MESSAGES].find({"title": "Citramon 2", "status": "pending"}))
    stored = world.db[dbm.REMINDERS].find_one({"_id": rid})
    if recreated:
        assert stored is not None and stored["title"] == "Lunch", stored
    else:
        assert stored is None
