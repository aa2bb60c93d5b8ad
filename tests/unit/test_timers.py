"""The consumer's timer wheel runs on the injected clock: a fake clock moves it, nothing waits."""

from __future__ import annotations

import datetime as dt

from consumer.timers import Timers
from shared.clock import FakeClock


def test_a_timer_runs_once_the_fake_clock_reaches_its_instant_and_not_before():
    clock = FakeClock()
    timers = Timers(clock, thread=False)
    ran: list[str] = []
    timers.at(clock() + dt.timedelta(seconds=30), lambda: ran.append("b"))
    timers.at(clock() + dt.timedelta(seconds=10), lambda: ran.append("a"))
    clock.advance(9.999)
    assert timers.run_due() == 0 and ran == []
    clock.advance(0.001)
    assert timers.run_due() == 1 and ran == ["a"]
    assert timers.next_at() == clock() + dt.timedelta(seconds=20)
    clock.advance(3600)
    assert timers.run_due() == 1 and ran == ["a", "b"]


def test_a_timer_armed_for_a_past_instant_runs_at_once():
    clock = FakeClock()
    timers = Timers(clock, thread=False)
    ran: list[int] = []
    timers.at(clock() - dt.timedelta(seconds=5), lambda: ran.append(1))
    assert timers.run_due() == 1 and ran == [1]


def test_cancel_all_hands_back_what_had_not_run():
    clock = FakeClock()
    timers = Timers(clock, thread=False)
    timers.at(clock() + dt.timedelta(seconds=1), lambda: None)
    assert len(timers.cancel_all()) == 1
    clock.advance(5)
    assert timers.run_due() == 0
