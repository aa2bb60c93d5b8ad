"""Scenario 6: crash and fault drills. Each reports sent, lost, duplicates and terminal.

``terminal``: every message of the drill has left ``pending`` in the database (after the
janitor, run with a shifted ``now`` when the drill needs it).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from typing import Any
from zoneinfo import ZoneInfo

from bench import workload
from bench.scenarios_herd import (
    arm_herd,
    deliveries,
    janitor_until_terminal,
    wait_delivered,
    wait_terminal,
)
from bench.stack import TZPUSH, BenchStack, Proc
from creator.manage import Manager
from creator.planner import Planner
from shared.store import db as dbm

Doc = dict[str, Any]


def _finish(st: BenchStack, docs: list[Doc], due: dt.datetime, settings: Any) -> Doc:
    ids = [d["_id"] for d in docs]
    final = wait_terminal(st, ids, 90)
    out = deliveries(st, set(ids), due)
    out.pop("lateness_ms")
    out["statuses"] = final
    if final.get("pending", 0):
        out.update(janitor_until_terminal(st, ids, settings))
        final = out["statuses_after_janitor"]
    out["terminal"] = final.get("pending", 0) == 0
    return out


def _herd_drill(
    st: BenchStack,
    n: int,
    seed: int,
    prefix: str,
    action: Any,
    *,
    rate: float = 100000.0,
    lead: float = 10.0,
) -> Doc:
    """Consumer up, herd armed, ``action(consumer, due)`` during it, then account for all."""
    settings = st.settings_for(prefix, lead=lead, rate=rate)
    consumer = st.consumer(settings, f"{prefix}-consumer")
    procs: list[Proc] = [consumer]
    try:
        consumer.wait_log("consuming", 60)
        docs, due, timing = arm_herd(st, settings, n, seed, prefix)
        note = action(consumer, due, procs, settings)
        wait_delivered(st, n, max(30.0, due.timestamp() + 60 - time.time()))
        out = _finish(st, docs, due, settings)
    finally:
        for p in procs:
            p.stop()
    out.update(**timing, action=note)
    return out


def broker_kill9(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    st.fake.reset()

    def act(consumer: Proc, due: dt.datetime, procs: list[Proc], settings: Any) -> str:
        pid = st.local.kill9("activemq")
        t = time.time()
        st.local.start("activemq")
        return f"kill -9 broker pid {pid} with {n} armed; back after {time.time() - t:.1f} s"

    return _herd_drill(st, n, seed, "dbroker", act, lead=lead)


def db_kill9(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    st.fake.reset(latency_ms=50)

    def act(consumer: Proc, due: dt.datetime, procs: list[Proc], settings: Any) -> str:
        time.sleep(max(0.0, due.timestamp() + 0.2 - time.time()))
        got = st.fake.stats()["pushes_accepted"]
        pid = st.local.kill9("mongo")
        t = time.time()
        st.local.start("mongo")
        return (
            f"kill -9 database pid {pid} at due+0.2 s ({got} pushes in); "
            f"back after {time.time() - t:.1f} s"
        )

    try:
        return _herd_drill(st, n, seed, "ddb", act, lead=lead)
    finally:
        st.fake.reset()


def _half_pushed(st: BenchStack, n: int, due: dt.datetime) -> int:
    """Wait until the fake has accepted half of the herd (or 30 s past due); how many it has."""
    time.sleep(max(0.0, due.timestamp() - 0.5 - time.time()))
    got = 0
    while got < n // 2 and time.time() < due.timestamp() + 30:
        got = st.fake.stats()["pushes_accepted"]
        time.sleep(0.01)
    return got


def consumer_kill9(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    st.fake.reset()

    def act(consumer: Proc, due: dt.datetime, procs: list[Proc], settings: Any) -> str:
        got = _half_pushed(st, n, due)
        consumer.kill9()
        again = st.consumer(settings, "dconsumer-consumer-2")
        procs.append(again)
        return f"kill -9 consumer after {got} of {n} pushes; restarted"

    return _herd_drill(st, n, seed, "dconsumer", act, rate=2000.0, lead=lead)


def fake_5xx(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    st.fake.reset(error_rate=0.2)

    def act(consumer: Proc, due: dt.datetime, procs: list[Proc], settings: Any) -> str:
        return "fake answers 5xx to 20% of requests (500 JSON or 502 HTML)"

    try:
        out = _herd_drill(st, n, seed, "d5xx", act, lead=lead)
        out["fake_http_errors"] = st.fake.stats().get("http_errors", {})
        return out
    finally:
        st.fake.reset()


def consumer_sigterm(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """SIGTERM (a deploy, a scale-in) while the herd is being sent; another consumer goes on."""
    st.fake.reset()

    def act(consumer: Proc, due: dt.datetime, procs: list[Proc], settings: Any) -> str:
        got = _half_pushed(st, n, due)
        assert consumer.popen is not None
        consumer.popen.send_signal(signal.SIGTERM)
        t = time.time()
        again = st.consumer(settings, "dsigterm-consumer-2")
        procs.append(again)
        code = consumer.popen.wait(60)
        return (
            f"SIGTERM to the consumer after {got} of {n} pushes; it exited {code} after "
            f"{time.time() - t:.1f} s; a second consumer took the rest"
        )

    return _herd_drill(st, n, seed, "dsigterm", act, rate=2000.0, lead=lead)


def db_pause(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """The database stops answering for 3 s at the due instant (SIGSTOP, then SIGCONT)."""
    st.fake.reset()
    grace: list[int] = []

    def act(consumer: Proc, due: dt.datetime, procs: list[Proc], settings: Any) -> str:
        grace.append(settings.grace_seconds("meal"))
        pid = st.local.pid("mongo")
        assert pid is not None
        time.sleep(max(0.0, due.timestamp() - 0.1 - time.time()))
        got = st.fake.stats()["pushes_accepted"]
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(3.0)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"database paused 3 s from due-0.1 s ({got} pushes in); grace {grace[0]} s"

    out = _herd_drill(st, n, seed, "dpause", act, lead=lead)
    out["within_grace"] = (out.get("late_ms_max") or 0) <= 1000 * grace[0]
    return out


def handover(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """A tenth of the herd's devices pass to other users (same token, new login) while the
    herd is armed: the installs must get none of their previous users' reminders."""
    st.fake.reset()
    prefix = "dhand"
    settings = st.settings_for(prefix, lead=lead)
    consumer = st.consumer(settings, f"{prefix}-consumer")
    broker = st.broker(settings)
    try:
        consumer.wait_log("consuming", 60)
        docs, due, timing = arm_herd(st, settings, n, seed, prefix, margin_s=3.0 + n / 200)
        manager = Manager(st.db, Planner(st.db, broker, settings), settings)
        handed = docs[::10]
        t = time.perf_counter()
        for i, d in enumerate(handed):
            uid = f"{prefix}-new-{i:05d}"
            manager.upsert_user(uid, timezone="UTC")
            token = st.db[dbm.TOKENS].find_one({"_id": d["notificationTokenId"]})
            assert token is not None
            manager.register_token(uid, device=token["deviceId"], token=token["token"])
        logins_s = time.perf_counter() - t
        before_due = (due - dt.datetime.now(dt.UTC)).total_seconds()
        wait_delivered(st, n - len(handed), max(30.0, due.timestamp() + 60 - time.time()))
        out = _finish(st, docs, due, settings)
    finally:
        broker.close()
        consumer.stop()
    handed_ids = {d["_id"] for d in handed}
    to_old_user = sum(
        1 for p in st.fake.pushes() if (p.get("data") or {}).get("messageId") in handed_ids
    )
    reasons = statuses_with_reason(st, sorted(handed_ids))
    # The handed-over messages are cancelled on purpose: they are not "lost".
    out["lost"] = out["lost"] - len(handed_ids) + to_old_user
    out.update(
        **timing,
        handed_over=len(handed_ids),
        pushes_to_previous_user=to_old_user,
        handed_over_statuses=reasons,
        logins_seconds=round(logins_s, 2),
        logins_done_before_due_s=round(before_due, 2),
        action=f"{len(handed_ids)} devices passed to new users {before_due:.1f} s before due",
    )
    return out


def statuses_with_reason(st: BenchStack, ids: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in st.db[dbm.MESSAGES].find({"_id": {"$in": ids}}, {"status": 1, "reason": 1}):
        key = f"{d['status']}: {d.get('reason')}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def two_creators(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """Two ``tzpush creator --once`` started at once on the same reminders (next whole minute)."""
    st.fake.reset()
    st.db[dbm.STATE].delete_many({})
    st.db[dbm.PARTITIONS].delete_many({})
    prefix = "dtwo"
    settings = st.settings_for(prefix, lead=min(lead, 5.0))
    now = dt.datetime.now(dt.UTC)
    # Reminders are whole local minutes: the first whole minute that leaves time to seed, start
    # both creators, plan and arm (about 5 s at 1,000 reminders here) before the lead.
    ready = now + dt.timedelta(seconds=8 + lead + n / 150)
    due = ready.replace(second=0, microsecond=0)
    if due < ready:
        due += dt.timedelta(minutes=1)
    users, tokens, reminders = workload.population(n, 1, seed, prefix, now)
    for u, r in zip(users, reminders, strict=True):
        r["time"] = due.astimezone(ZoneInfo(u["timezone"])).strftime("%H:%M")
    workload.seed_population(st.db, users, tokens, reminders)
    consumer = st.consumer(settings, f"{prefix}-consumer")
    creators: list[Proc] = []
    try:
        consumer.wait_log("consuming", 60)
        argv = [str(TZPUSH), "creator", "--once"]
        for i in range(2):
            p = Proc(f"{prefix}-creator-{i}", argv, st.env(settings), st.log_dir / f"c{i}.log")
            creators.append(p.start())
        for p in creators:
            assert p.popen is not None
            p.popen.wait(300)
        docs = list(st.db[dbm.MESSAGES].find({"reminderId": {"$regex": f"^{prefix}"}}))
        wait_delivered(st, len(docs), max(30.0, due.timestamp() + 30 - time.time()))
        out = _finish(st, docs, due, settings)
    finally:
        consumer.stop()
        for p in creators:
            p.stop()
    out["reminders"] = n
    out["messages_in_db"] = len(docs)
    out["creator_reports"] = [p.log_lines()[-1:] for p in creators]
    return out


def skipped_pass(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """Creator down for longer than the horizon's slack (clock-shifted planners, no waiting).

    Pass 1 at t0 plans [t0, t0+1h). The reminders fall at t0+90min. The creator is down; the
    next pass runs at t0+3h and plans [t0+3h, t0+4h). A control run resumes at t0+70min.
    """
    prefix = "dskip"
    t0 = (dt.datetime.now(dt.UTC) + dt.timedelta(days=2)).replace(second=0, microsecond=0)
    at = t0 + dt.timedelta(minutes=90)
    users, tokens, reminders = workload.population(n, 1, seed, prefix, t0)
    for u, r in zip(users, reminders, strict=True):
        r["time"] = at.astimezone(ZoneInfo(u["timezone"])).strftime("%H:%M")
    workload.seed_population(st.db, users, tokens, reminders)
    out: Doc = {"reminders": n, "occurrence": at.isoformat()}
    for name, resume in (("down_3h", 180), ("control_down_70min", 70)):
        settings = st.settings_for(f"{prefix}{name[:4]}")
        settings = settings.model_copy(
            update={"creator": settings.creator.model_copy(update={"horizon_hours": 1.0})}
        )
        st.db[dbm.STATE].delete_many({})
        st.db[dbm.PARTITIONS].delete_many({})
        st.db[dbm.MESSAGES].delete_many({"reminderId": {"$regex": f"^{prefix}"}})
        broker = st.broker(settings)
        try:
            r1 = Planner(st.db, broker, settings, clock=lambda: t0).run_pass()
            later = t0 + dt.timedelta(minutes=resume)
            r2 = Planner(st.db, broker, settings, clock=lambda later=later: later).run_pass()
        finally:
            broker.close()
        planned = st.db[dbm.MESSAGES].count_documents({"reminderId": {"$regex": f"^{prefix}"}})
        out[name] = {
            "pass1": r1.summary(),
            "pass2": r2.summary(),
            "planned": planned,
            "lost": n - planned,
            "duplicates": 0,
            "terminal": "no documents to be terminal" if planned == 0 else "armed (days ahead)",
        }
    st.db[dbm.STATE].delete_many({})
    st.db[dbm.PARTITIONS].delete_many({})
    return out


DRILLS = {
    "broker_kill9": broker_kill9,
    "db_kill9": db_kill9,
    "consumer_kill9": consumer_kill9,
    "two_creators": two_creators,
    "skipped_pass": skipped_pass,
    "fake_5xx": fake_5xx,
    "consumer_sigterm": consumer_sigterm,
    "db_pause": db_pause,
    "handover": handover,
}
