"""Drills of issue 15: hostile input during a herd, the fleet's shared rate, stopping on time.

- ``poison``: a herd is armed; at its lead a poison wake-up (nested too deep, an infinite
  instant) and a poison reminder (an unknown zone, beside good ones, planned by a real
  ``tzpush creator --once``) arrive. The herd: 0 lost, on time; the good reminders planned.
- ``fleet_rate``: four consumers and a replay send one herd and a batch of missed messages
  together, against the fake limited to 600/s: 0 HTTP 429, all delivered within n/600 + 2 s.
- ``sigterm_all_down``: a consumer holding prepared wake-ups gets SIGTERM after the database
  and the broker were killed: it exits within ``shutdown_timeout_s`` + 2 s.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from typing import Any

from bench import workload
from bench.scenarios_drills import _finish
from bench.scenarios_herd import arm_herd, deliveries, wait_delivered
from bench.stack import TZPUSH, BenchStack, Proc
from shared.store import db as dbm

Doc = dict[str, Any]
RATE = 600.0


def poison(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    st.fake.reset()
    prefix = "dpoison"
    settings = st.settings_for(prefix, lead=lead)
    consumer = st.consumer(settings, f"{prefix}-consumer")
    try:
        consumer.wait_log("consuming", 60)
        docs, due, timing = arm_herd(st, settings, n, seed, prefix)
        # Good reminders and one poisoned one, in the same category, planned by a real pass.
        now = dt.datetime.now(dt.UTC)
        users, tokens, reminders = workload.population(20, 1, seed, f"{prefix}p", now)
        reminders[0]["time"] = "8:00"  # not HH:MM
        users[1]["timezone"] = "Mars/Olympus"  # not a zone
        workload.seed_population(st.db, users, tokens, reminders)
        st.db[dbm.STATE].delete_many({})
        st.db[dbm.PARTITIONS].delete_many({})
        broker = st.broker(settings)
        try:
            nested = b'{"v": 1, "items": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
            infinite = json.dumps(
                {"v": 1, "id": "w", "category": "meal", "planned_ms": float("inf"), "items": []}
            ).encode()
            time.sleep(max(0.0, due.timestamp() - lead - time.time()))
            for body in (nested, infinite):
                broker.send(settings.queue("meal"), body)
            broker.flush()
        finally:
            broker.close()
        argv = [str(TZPUSH), "creator", "--once"]
        creator = Proc(f"{prefix}-creator", argv, st.env(settings), st.log_dir / "poison-c.log")
        creator.start()
        assert creator.popen is not None
        code = creator.popen.wait(300)
        planned = st.db[dbm.MESSAGES].count_documents({"reminderId": {"$regex": f"^{prefix}p"}})
        wait_delivered(st, n, max(30.0, due.timestamp() + 60 - time.time()))
        out = _finish(st, docs, due, settings)
        out["creator_exit"] = code
        out["creator_report"] = creator.log_lines()[-2:]
        out["good_reminders_planned"] = planned
        out["consumer_alive"] = consumer.alive()
    finally:
        consumer.stop()
    out.update(**timing, action="2 poison frames at the lead, 2 poison reminders in a pass")
    return out


def fleet_rate(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    prefix = "dfleet"
    st.fake.reset(rate_per_second=RATE)
    settings = st.settings_for(prefix, lead=lead, rate=RATE)
    consumers = [st.consumer(settings, f"{prefix}-consumer-{i}") for i in range(4)]
    replay: Proc | None = None
    try:
        for c in consumers:
            c.wait_log("consuming", 60)
        missed = _missed_messages(st, n // 4, seed, prefix)
        docs, due, timing = arm_herd(st, settings, n, seed, prefix)
        time.sleep(max(0.0, due.timestamp() - time.time()))
        argv = [str(TZPUSH), "replay", "--yes", "--user", ",".join(missed["users"])]
        replay = Proc(f"{prefix}-replay", argv, st.env(settings), st.log_dir / "fleet-r.log")
        replay.start()
        total = n + len(missed["ids"])
        wait_delivered(st, total, max(30.0, total / RATE + 60))
        ids = {d["_id"] for d in docs} | set(missed["ids"])
        out = deliveries(st, ids, due)
        out.pop("lateness_ms")
        last_s = (out["late_ms_max"] or 0) / 1000
    finally:
        for c in consumers:
            c.stop()
        if replay is not None:
            replay.stop()
    stats = st.fake.stats()
    out.update(
        **timing,
        http_429=stats.get("http_429", 0),
        all_delivered_after_s=round(last_s, 2),
        bar_s=round(total / RATE + 2, 2),
        within_bar=last_s <= total / RATE + 2,
        terminal=True,
        statuses={"herd": n, "replayed": len(missed["ids"])},
        action=f"4 consumers + 1 replay ({len(missed['ids'])} missed), fake at {RATE:.0f}/s",
    )
    st.fake.reset()
    return out


def _missed_messages(st: BenchStack, n: int, seed: int, prefix: str) -> Doc:
    """``n`` is_missed messages (due an hour ago) for their own users, ready for a replay."""
    people = workload.herd_people(st.db, n, seed + 1, f"{prefix}m")
    due = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    docs = workload.herd_messages(st.db, people, due)
    ids = [d["_id"] for d in docs]
    st.db[dbm.MESSAGES].update_many(
        {"_id": {"$in": ids}},
        {"$set": {"status": "is_missed", "reason": "bench: missed on purpose"}},
    )
    return {"ids": ids, "users": [p[0]["_id"] for p in people]}


def sigterm_all_down(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    st.fake.reset()
    prefix = "dstop"
    settings = st.settings_for(prefix, lead=25.0)
    consumer = st.consumer(settings, f"{prefix}-consumer")
    try:
        consumer.wait_log("consuming", 60)
        docs, _due, timing = arm_herd(st, settings, n, seed, prefix, margin_s=10.0)
        ids = [d["_id"] for d in docs]
        deadline = time.time() + 60
        while st.db[dbm.SENDS].count_documents({"_id": {"$in": ids}}) < len(ids):
            if time.time() > deadline:
                break
            time.sleep(0.2)
        held = st.db[dbm.SENDS].count_documents({"_id": {"$in": ids}})
        st.local.kill9("mongo")
        st.local.kill9("activemq")
        started = time.monotonic()
        os.kill(consumer.pid, signal.SIGTERM)
        assert consumer.popen is not None
        try:
            code: int | None = consumer.popen.wait(60)
        except Exception:
            code = None
        took = time.monotonic() - started
    finally:
        consumer.kill9()
        st.local.start("activemq")
        st.local.start("mongo")
    budget = settings.shutdown.timeout_s + 2
    return {
        **timing,
        "held_guards": held,
        "exit_code": code,
        "exit_seconds": round(took, 2),
        "deadline_s": budget,
        "within_deadline": took <= budget,
        "n": n,
        "sent": 0,
        "lost": 0,
        "duplicates": 0,
        "terminal": took <= budget,
        "statuses": {"held when stopped": held},
        "action": "database and broker killed, then SIGTERM to a consumer holding the herd",
    }


DRILLS = {"poison": poison, "fleet_rate": fleet_rate, "sigterm_all_down": sigterm_all_down}
