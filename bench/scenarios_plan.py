"""Scenarios 1 (plan: from nothing to armed) and 5 (idle: what a minute with nothing due costs)."""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from typing import Any

import pymongo
from pymongo import monitoring

from bench import workload
from bench.localtime_bench import run as localtime_run
from bench.stack import BenchStack
from creator.planner import Planner
from shared.store import db as dbm

Doc = dict[str, Any]
PREFIX = "plan"


class Recorder(monitoring.CommandListener):
    """Per command name: count, server-side seconds, documents returned (cursor batches)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.docs: dict[str, int] = defaultdict(int)
        self._coll: dict[int, str] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        coll = event.command.get(event.command_name)
        if event.command_name == "getMore":
            coll = event.command.get("collection")
        self._coll[event.request_id] = f"{event.command_name}:{coll}"

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        key = self._coll.pop(event.request_id, event.command_name)
        self.count[key] += 1
        self.seconds[key] += event.duration_micros / 1e6
        cur = event.reply.get("cursor") if isinstance(event.reply, dict) else None
        if cur:
            self.docs[key] += len(cur.get("firstBatch") or cur.get("nextBatch") or [])

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._coll.pop(event.request_id, None)

    def table(self) -> dict[str, Doc]:
        return {
            k: {"calls": self.count[k], "seconds": round(self.seconds[k], 3), "docs": self.docs[k]}
            for k in sorted(self.count, key=lambda k: -self.seconds[k])
        }


def _coll_bytes(st: BenchStack, coll: str) -> Doc:
    s = st.db.command("collStats", coll)
    return {k: s.get(k, 0) for k in ("count", "size", "storageSize", "totalIndexSize")}


def run_plan(st: BenchStack, n_users: int, seed: int, idle_gap_min: float) -> Doc:
    now = dt.datetime.now(dt.UTC)
    gap = (now, now + dt.timedelta(minutes=idle_gap_min))
    users, tokens, reminders = workload.population(n_users, 2, seed, PREFIX, now, gap)
    t = time.perf_counter()
    workload.seed_population(st.db, users, tokens, reminders)
    seed_s = time.perf_counter() - t
    settings = st.settings_for(PREFIX)
    rec = Recorder()
    client: pymongo.MongoClient[Doc] = pymongo.MongoClient(
        settings.mongo.uri.get_secret_value(), tz_aware=True, event_listeners=[rec]
    )
    broker = st.broker(settings)
    sched_before = st.scheduler_bytes()
    try:
        planner = Planner(client[st.dbname], broker, settings)
        t = time.perf_counter()
        report = planner.run_pass()
        wall = time.perf_counter() - t
    finally:
        broker.close()
        client.close()
    time.sleep(2)  # let the broker's scheduler journal settle before du
    sched_after = st.scheduler_bytes()
    msgs = _coll_bytes(st, dbm.MESSAGES)
    floor = insert_floor(st)
    n = len(reminders)
    return {
        "reminders": n,
        "users": n_users,
        "seed_seconds": round(seed_s, 2),
        "wall_seconds": round(wall, 2),
        "planned": report.planned,
        "inserted": report.inserted,
        "wakeups": report.wakeups,
        "floor_seconds": floor,
        "ratio_to_floor": round(wall / floor, 2) if floor else None,
        "bar_ok": bool(floor and wall <= 1.3 * floor),
        "scheduler_bytes_per_reminder": round((sched_after - sched_before) / n, 1),
        "scheduler_bytes": [sched_before, sched_after],
        "db_messages": msgs,
        "db_bytes_per_reminder": round(msgs["size"] / n, 1) if msgs["size"] else None,
        "db_storage_bytes_per_reminder": round(msgs["storageSize"] / n, 1),
        "db_round_trips": rec.table(),
        "localtime": localtime_run(n=min(n, 100_000), seed=seed),
        "idle_gap": [gap[0].isoformat(), gap[1].isoformat()],
    }


def insert_floor(st: BenchStack) -> float:
    """The database's own time to insert the same documents with the same indexes."""
    docs = list(st.db[dbm.MESSAGES].find())
    scratch = st.client[f"{st.dbname}_floor"]["notification_messages"]
    scratch.create_indexes(dbm.index_plan()[dbm.MESSAGES])
    t = time.perf_counter()
    for i in range(0, len(docs), 5000):
        scratch.insert_many(docs[i : i + 5000], ordered=False)
    took = time.perf_counter() - t
    return round(took, 2)


def ops(st: BenchStack) -> dict[str, int]:
    return dict(st.client.admin.command("serverStatus")["opcounters"])


def run_idle(st: BenchStack, seconds: float = 60.0) -> Doc:
    """Creator service + consumer running on the planned data; a minute with nothing due."""
    settings = st.settings_for(PREFIX)
    consumer = st.consumer(settings, "idle-consumer")
    creator = st.creator(settings, "idle-creator")
    try:
        consumer.wait_log("consuming", 60)
        creator.wait_log("planning pass", 180)  # its start-up pass, outside the minute
        time.sleep(3)
        before, cpu0 = ops(st), {p.name: p.cpu() for p in (consumer, creator)}
        time.sleep(seconds)
        after, cpu1 = ops(st), {p.name: p.cpu() for p in (consumer, creator)}
        delta = {k: after[k] - before.get(k, 0) for k in after}
        delta["command"] -= 1  # our own serverStatus
        per_pass = creator_pass_reads(st)
    finally:
        consumer.stop()
        creator.stop()
    interval = settings.creator.interval_seconds
    return {
        "seconds": seconds,
        "opcounters": delta,
        "cpu_seconds": {k: round(cpu1[k] - cpu0[k], 3) for k in cpu1},
        "creator_pass_every_s": interval,
        "creator_pass": per_pass,
        "creator_docs_read_per_minute_avg": round(per_pass["docs_read"] * 60 / interval),
    }


def creator_pass_reads(st: BenchStack) -> Doc:
    """One planning pass as the service runs it every interval, with its reads counted."""
    settings = st.settings_for(PREFIX)
    rec = Recorder()
    client: pymongo.MongoClient[Doc] = pymongo.MongoClient(
        settings.mongo.uri.get_secret_value(), tz_aware=True, event_listeners=[rec]
    )
    broker = st.broker(settings)
    shift = dt.timedelta(seconds=settings.creator.interval_seconds)
    try:
        planner = Planner(client[st.dbname], broker, settings, clock=lambda: _now() + shift)
        t = time.perf_counter()
        report = planner.run_pass()
        wall = time.perf_counter() - t
    finally:
        broker.close()
        client.close()
    return {
        "wall_seconds": round(wall, 2),
        "planned": report.planned,
        "docs_read": sum(rec.docs.values()),
        "round_trips": rec.table(),
    }


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
