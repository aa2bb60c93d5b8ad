"""A rule-based state machine over management and planning: random interleavings of users,
logins, logouts, reminders (put, patch, pause, resume, remove), zone and category changes,
erasures, planning passes, a fake clock moving on, and batches mixing them. After each step
``management_check.check`` compares the store with the oracle (``management_model``).

It runs on any backend the writers and the planner run on (``management_rig.Backend``). The
broker is a stub that records which message ids were armed; the clock is fake (no waiting).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from creator.planner import Planner
from creator.writers import Writers
from creator.writers.batch import Item, Login, ReminderPut, UserChange, apply
from creator.writers.reminders import ReminderSpec
from shared.settings import Settings
from tests.unit import management_model as mm
from tests.unit.management_check import Doc, check
from tests.unit.management_rig import (
    HORIZON,
    SLICE,
    Backend,
    StubBroker,
    TickingClock,
    machine_settings,
    outcome,
    raised,
)

USERS = ("ana", "ben", "cy")
DEVICES = ("d1", "d2", "d3")
TOKENS = tuple(f"ExponentPushToken[t{i}]" for i in (1, 2, 3))
REMINDER_IDS = ("r1", "r2", "r3", "r4")
CATEGORIES = ("meal", "mood", "medication")
OFFSETS = (0, 0, 5, 45, -90, 1440, -1440)


def spec_of(c: mm.Content) -> ReminderSpec:
    days = None if c.weekdays is None else list(c.weekdays)
    return ReminderSpec(c.category, c.label, c.at, c.offset, days, active=c.active)


# -- strategies --------------------------------------------------------------------------------
hhmm = st.integers(0, 24 * 60 - 1).map(lambda m: f"{m // 60:02d}:{m % 60:02d}")
weekdays = st.none() | st.sets(st.integers(0, 6), min_size=1).map(lambda s: tuple(sorted(s)))
contents = st.builds(
    mm.Content,
    category=st.sampled_from(CATEGORIES),
    label=st.sampled_from(("lunch", "tea")),
    at=hhmm,
    offset=st.sampled_from(OFFSETS),
    weekdays=weekdays,
    active=st.sampled_from((True, True, False)),
)
zones = st.sampled_from(mm.ZONES)
devices, tokens = st.sampled_from(DEVICES), st.sampled_from(TOKENS)
user_changes = st.builds(
    UserChange,
    user_id=st.sampled_from(USERS),
    timezone=st.sampled_from((*mm.ZONES, None)),
    enabled=st.sampled_from((None, None, None, True, False)),
    categories=st.dictionaries(st.sampled_from(CATEGORIES), st.booleans(), max_size=2),
)
logins = st.builds(Login, st.sampled_from(USERS), devices, tokens)
puts = st.tuples(st.sampled_from(USERS), st.sampled_from(REMINDER_IDS), contents)
items = st.one_of(user_changes, logins, puts)
minutes = st.sampled_from((1, 7, 30, 61, 240, 361, 720)) | st.integers(1, 1500)


class ManagementMachine(RuleBasedStateMachine):
    """Management calls and planning passes against the oracle."""

    users = Bundle("users")  # created (maybe erased since)
    reminders = Bundle("reminders")  # put (maybe removed or erased since)
    some_reminders = reminders | st.sampled_from(REMINDER_IDS)

    def __init__(self, backend: Backend, settings: Settings) -> None:
        super().__init__()
        backend.reset()
        self.backend = backend
        self.clock = TickingClock(mm.START)
        backend.use_clock(self.clock)
        self.broker = StubBroker()
        self.planner = Planner(backend.where, cast(Any, self.broker), settings, self.clock)
        self.w = Writers(backend.where, self.planner, settings)
        self.model = mm.Model()

    def expect(self, predicted: str, call: Callable[[], Any], *, reminder: bool = False) -> None:
        self.model.note()
        got = outcome(call, reminder=reminder)
        assert got == predicted, f"answered {got}, the model says {predicted}"

    @initialize(first=st.sampled_from((True, True, True, False)))
    def first_pass(self, first: bool) -> None:
        if first:
            self.planning_pass()

    @initialize(
        target=users,
        them=st.lists(
            st.tuples(
                st.sampled_from(USERS), zones, devices, tokens, st.sampled_from(REMINDER_IDS)
            ),
            min_size=1,
            max_size=2,
            unique_by=lambda t: t[0],
        ),
        content=contents.map(lambda c: replace(c, active=True)),
        batched=st.booleans(),
    )
    def onboard(
        self, them: list[tuple[str, str, str, str, str]], content: Any, batched: bool
    ) -> Any:
        """Users each with a device and a reminder: batches, or single calls."""
        for uid, zone, device, token, rid in them:
            if batched:
                self.apply_batch([UserChange(uid, timezone=zone), Login(uid, device, token)])
                self.apply_batch([(uid, rid, content)])
            else:
                self.change_zone(uid, zone)
                self.login(uid, device, token)
                self.put_reminder(uid, rid, content)
        return multiple(*(t[0] for t in them))

    # -- users ---------------------------------------------------------------------------------
    @rule(target=users, it=user_changes)
    def change_user(self, it: UserChange) -> Any:
        cats = dict(it.categories or {})
        predicted = self.model.change_user(it.user_id, it.timezone, it.enabled, cats)
        self.expect(predicted, lambda: self.w.users.upsert(it))
        return it.user_id if predicted == mm.OK else multiple()

    @rule(uid=users, zone=zones)
    def change_zone(self, uid: str, zone: str) -> None:
        predicted = self.model.change_user(uid, zone)
        self.expect(predicted, lambda: self.w.users.upsert(UserChange(uid, timezone=zone)))

    @rule(uid=users, category=st.sampled_from(CATEGORIES), on=st.booleans())
    def switch_category(self, uid: str, category: str, on: bool) -> None:
        predicted = self.model.change_user(uid, None, None, {category: on})
        change = UserChange(uid, categories={category: on})
        self.expect(predicted, lambda: self.w.users.upsert(change))

    @rule(uid=consumes(users))
    def erase(self, uid: str) -> None:
        self.expect(self.model.erase(uid), lambda: self.w.erasure.erase(uid))

    # -- logins --------------------------------------------------------------------------------
    @rule(uid=users, device=devices, token=tokens)
    def login(self, uid: str, device: str, token: str) -> None:
        predicted = self.model.login(uid, device, token)
        self.expect(predicted, lambda: self.w.logins.register(uid, device=device, token=token))

    @rule(uid=users, device=devices)
    def logout(self, uid: str, device: str) -> None:
        self.expect(self.model.logout(uid, device), lambda: self.w.logins.logout(uid, device))

    # -- reminders -----------------------------------------------------------------------------
    @rule(target=reminders, uid=users, rid=st.sampled_from(REMINDER_IDS), content=contents)
    def put_reminder(self, uid: str, rid: str, content: mm.Content) -> Any:
        """The API's PUT (and a batch item's single call)."""
        predicted = self.model.put(uid, rid, content)
        self.expect(
            predicted, lambda: self.w.reminders.put(uid, rid, spec_of(content)), reminder=True
        )
        return rid if predicted in (mm.CREATED, mm.CHANGED, mm.UNCHANGED) else multiple()

    @rule(
        uid=users,
        rid=some_reminders,
        changes=st.fixed_dictionaries(
            {}, optional={"at": hhmm, "weekdays": weekdays, "active": st.booleans()}
        ),
    )
    def patch_reminder(self, uid: str, rid: str, changes: dict[str, Any]) -> None:
        """The API's PATCH: the stored content with some fields changed, put again."""
        predicted = self.model.patch(uid, rid, **changes)

        def patched(old: Doc) -> ReminderSpec:
            return spec_of(replace(mm.Content.of(old), **changes))

        first = spec_of(mm.Content("meal", "lunch", "08:00"))  # replaced by ``patched``
        put = self.w.reminders.put
        self.expect(predicted, lambda: put(uid, rid, first, patch=patched), reminder=True)

    @rule(rid=some_reminders, active=st.booleans())
    def pause_or_resume(self, rid: str, active: bool) -> None:
        """The CLI's change of a reminder (``tzpush reminders update``)."""
        predicted = self.model.update(rid, active=active)
        self.expect(predicted, lambda: self.w.reminders.update(rid, active=active))

    @rule(rid=some_reminders, at=hhmm)
    def move_time(self, rid: str, at: str) -> None:
        self.expect(self.model.update(rid, at=at), lambda: self.w.reminders.update(rid, at=at))

    @rule(rid=some_reminders)
    def remove_reminder(self, rid: str) -> None:
        self.expect(self.model.remove(rid), lambda: self.w.reminders.remove(rid))

    # -- batches -------------------------------------------------------------------------------
    @rule(batch=st.lists(items, min_size=2, max_size=3))
    def apply_batch(self, batch: Sequence[UserChange | Login | tuple[str, str, Any]]) -> None:
        """``POST /v1/batch``: as if item after item."""
        its: list[Item] = []
        predicted = []
        for it in batch:
            if isinstance(it, UserChange):
                cats = dict(it.categories or {})
                predicted.append(self.model.change_user(it.user_id, it.timezone, it.enabled, cats))
                its.append(it)
            elif isinstance(it, Login):
                predicted.append(self.model.login(it.user_id, it.device, it.token))
                its.append(it)
            else:
                uid, rid, content = it
                predicted.append(self.model.put(uid, rid, content))
                its.append(ReminderPut(uid, rid, spec_of(content)))
            self.model.note()
        got = [
            outcome(functools.partial(raised, o), reminder=isinstance(it, ReminderPut))
            for o, it in zip(apply(self.w, its), its, strict=True)
        ]
        assert got == predicted, f"batch answered {got}, the model says {predicted}"

    @precondition(lambda self: len(self.model.users) > 1 and self.model.active())
    @rule(data=st.data())
    def handover_batch(self, data: st.DataObject) -> None:
        """A batch mixing a handover (another user's login on an install someone holds, by its
        device id, its token string or both), a zone change and a reminder, in any order."""
        held = data.draw(st.sampled_from(sorted(self.model.active())))
        holder, device, token = held
        taker = data.draw(st.sampled_from(sorted(set(self.model.users) - {holder})))
        device = data.draw(st.sampled_from((device, *DEVICES)))
        token = token if device != held[1] else data.draw(st.sampled_from((token, *TOKENS)))
        batch: list[Any] = [
            Login(taker, device, token),
            UserChange(data.draw(st.sampled_from((holder, taker))), timezone=data.draw(zones)),
        ]
        if data.draw(st.booleans()):
            rid = data.draw(st.sampled_from(REMINDER_IDS))
            batch.append((data.draw(st.sampled_from((holder, taker))), rid, data.draw(contents)))
        self.apply_batch(data.draw(st.permutations(batch)))

    # -- planning and time ---------------------------------------------------------------------
    @rule()
    def planning_pass(self) -> None:
        before = self.clock()
        window = self.model.pass_window(before, HORIZON, SLICE)
        report = self.planner.run_pass()
        assert bool(report.planned_partitions) == (window is not None), (window, report.summary())
        if window is not None and report.window_end is not None:
            late = report.window_end - window[1]
            assert dt.timedelta(0) < late < dt.timedelta(seconds=2), (window, report.window_end)
            self.model.planned_until = report.window_end

    @rule(n=minutes)
    def time_passes(self, n: int) -> None:
        if self.clock.at + dt.timedelta(minutes=n) < mm.START + mm.REACH:
            self.clock.at += dt.timedelta(minutes=n)

    @precondition(lambda self: self.model.active())
    @rule(data=st.data())
    def unregister(self, data: st.DataObject) -> None:
        """The CLI's ``tzpush tokens unregister``: every registration of a token string or of a
        device id, whoever holds it."""
        _, device, token = data.draw(st.sampled_from(sorted(self.model.active())))
        by_token = data.draw(st.booleans())
        predicted = (
            self.model.unregister(token=token) if by_token else self.model.unregister(device=device)
        )
        if by_token:
            self.expect(predicted, lambda: self.w.logins.unregister(token=token))
        else:
            self.expect(predicted, lambda: self.w.logins.unregister(device=device))

    @invariant()
    def exactly_the_current_versions_are_pending(self) -> None:
        check(self.model, self.backend.raw, self.clock(), self.broker.armed)


def run_machine(backend: Backend, max_examples: int, steps: int = 30) -> None:
    """Run the state machine ``max_examples`` times over ``backend``, ``steps`` steps each."""
    config = machine_settings()
    run_state_machine_as_test(
        cast(Any, lambda: ManagementMachine(backend, config)),
        settings=settings(
            max_examples=max_examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        ),
    )


mm.assert_no_transitions(mm.ZONES, mm.START - dt.timedelta(days=3), mm.START + mm.REACH)
