"""Issue 14, clock skew: the janitor goes by the database server's clock, never by a creator's
clock that runs ahead; ``tzpush doctor`` reports how far this host's clock is from the
database server's."""

from __future__ import annotations

import datetime as dt

from creator.janitor import sweep
from ops.doctor import check_database
from shared.clock import utcnow
from shared.store import db as dbm
from shared.store.mongo import creator_stores
from tests.integration.ops_helpers import run_cli

AHEAD = dt.timedelta(minutes=7)


def _due_relative_to_janitor(world, uid: str, label: str, shift: dt.timedelta) -> str:
    """A safety message whose due + grace + janitor margin is ``shift`` from now (real clock)."""
    grace = world.settings.categories["safety"].grace_seconds
    margin = world.settings.creator.janitor_margin_seconds
    due = (utcnow() - dt.timedelta(seconds=grace + margin) + shift).replace(microsecond=0)
    (doc,) = world.due_messages([uid], due, category="safety", label=label, arm=False)
    return str(doc["_id"])


def test_a_janitor_7_minutes_ahead_ends_nothing_before_due_plus_grace_by_the_database(world):
    world.user("sk", "UTC")
    soon = _due_relative_to_janitor(world, "sk", "soon", dt.timedelta(minutes=3))
    gone = _due_relative_to_janitor(world, "sk", "gone", -dt.timedelta(minutes=1))
    before = utcnow()
    assert sweep(creator_stores(world.db).pending, world.settings, before + AHEAD) == 1
    assert world.message(soon)["status"] == "pending"  # 3 min short of due + grace + margin
    ended = world.message(gone)
    assert ended["status"] == "is_missed"
    # Judged, stamped and measured by the database's clock, not 7 minutes later.
    assert ended["finishedAt"] < utcnow() + dt.timedelta(seconds=5)
    assert ended["lateness_ms"] < (300 + 120 + 120) * 1000  # 480 s late, not 900 s


def test_a_planning_pass_7_minutes_ahead_does_not_end_what_is_not_yet_overdue(world):
    world.user("pl", "Asia/Kathmandu")
    soon = _due_relative_to_janitor(world, "pl", "soon", dt.timedelta(minutes=2))
    world.planner(clock=lambda: utcnow() + AHEAD).run_pass()
    assert world.message(soon)["status"] == "pending"


def test_the_database_server_reports_its_clock(world):
    clock = dbm.server_clock(world.db)
    assert clock is not None  # SecantusDB answers hello with localTime, as mongod does
    assert abs(clock.skew_s) < 2.0 and clock.rtt_s < 2.0
    assert abs((clock.server - utcnow()).total_seconds()) < 2.0


def test_doctor_reports_the_skew_and_fails_on_a_host_7_minutes_ahead(world, capsys):
    dbm.ensure_indexes(world.db)
    assert run_cli(world.settings, "doctor") == 0
    out = capsys.readouterr().out
    assert "clock skew" in out
    here = {c.name: c for c in check_database(world.settings)}["clock skew"]
    assert here.status == "ok" and "the database server by 0.0" in here.detail, here
    checks = {c.name: c for c in check_database(world.settings, clock=lambda: utcnow() + AHEAD)}
    skew = checks["clock skew"]
    assert skew.status == "fail", skew
    assert "ahead of the database server by 420" in skew.detail or "by 419" in skew.detail
    assert "NTP" in skew.fix


def test_the_janitor_after_a_long_pass_goes_by_the_time_it_runs_not_the_pass_start(world):
    """A pass that planned for minutes (1M reminders: 7 min here) used to hand the janitor the
    instant the pass began: it judged 'overdue' as of then (what became overdue meanwhile waited
    a whole interval) and logged a clock skew that was only the pass's own length."""
    world.user("lp", "UTC")
    gone = _due_relative_to_janitor(world, "lp", "gone", -dt.timedelta(minutes=2))
    calls = iter([utcnow() - dt.timedelta(minutes=6)])  # the pass began 6 minutes ago

    def clock() -> dt.datetime:
        return next(calls, None) or utcnow()

    world.planner(clock=clock).run_pass()
    assert world.message(gone)["status"] == "is_missed"
