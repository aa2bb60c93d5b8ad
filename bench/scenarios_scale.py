"""Scenario ``scale`` (issue 18): planning at scale, one creator and several, and a creator killed.

Opt-in (``--only scale``; not in the default run: at 1M reminders it takes well over 15 min).
Sizes: ``--scale-users`` (2 reminders and one token each; default 500,000 = 1M reminders).

- ``creators_1``, ``creators_2``, ...: ``tzpush creator --once`` processes started together on
  the same data (each database seeded anew), each one's peak RSS (``os.wait4``: ru_maxrss),
  its pass summary, and the wall time until all exited; every expected occurrence planned
  exactly once (one document per deterministic id, none missing).
- ``floor``: the database's own insert of the same message documents (same indexes, batches of
  5,000, streamed from the planned collection), against which the one-creator pass is set.
- ``killed``: two creator services (interval ``kill_interval`` s, lease a third of it);
  one is killed (SIGKILL) once part of its partitions is inserted; the other takes the dead
  one's partitions after its lease and finishes them: the time from the kill until every
  occurrence is planned and no window is left in progress, 0 lost, 0 duplicates.
- ``idle``: a creator service on the planned data for a minute: the database's opcounters.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from typing import Any

from bench import workload
from bench.stack import BenchStack, Proc
from shared.domain.plan import bucket_of
from shared.store import db as dbm

Doc = dict[str, Any]
PREFIX = "scale"
LEASE_S = 6.0  # the bench's creators: a heartbeat every 2 s, so --once waits 2 s to start


def seed(st: BenchStack, n_users: int, seed_: int, now: dt.datetime) -> tuple[int, float]:
    """The workload with each document's bucket, as the management code writes it."""
    users, tokens, reminders = workload.population(n_users, 2, seed_, PREFIX, now)
    for u in users:
        u["bucket"] = bucket_of(u["_id"])
    for d in (*tokens, *reminders):
        d["bucket"] = bucket_of(d["userId"])
    t = time.perf_counter()
    workload.seed_population(st.db, users, tokens, reminders)
    return len(reminders), time.perf_counter() - t


def _env(st: BenchStack, **extra: str) -> dict[str, str]:
    settings = st.settings_for(PREFIX)
    return st.env(settings, **{"TZPUSH_CREATOR__LEASE_SECONDS": str(LEASE_S), **extra})


def wait_rusage(p: Proc, timeout: float) -> tuple[int, int]:
    """Wait for a child we started; its exit code and peak RSS in KiB (ru_maxrss)."""
    assert p.popen is not None
    deadline = time.time() + timeout
    while time.time() < deadline:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            code = os.waitstatus_to_exitcode(status)
            p.popen.returncode = code
            return code, usage.ru_maxrss
        time.sleep(0.2)
    p.kill9()
    raise TimeoutError(f"{p.name} still running after {timeout} s")


def run_creators(st: BenchStack, k: int, expected: int | None, timeout: float) -> Doc:
    """``k`` ``tzpush creator --once`` processes at once on the current database."""
    procs = []
    t0 = time.perf_counter()
    for i in range(k):
        name = f"scale-once-{k}-{i}"
        argv = [st_tzpush(), "creator", "--once"]
        p = Proc(name, argv, _env(st), st.log_dir / f"{name}.log")
        st.procs.append(p)
        procs.append(p.start())
    out: Doc = {"creators": k, "per_creator": []}
    for p in procs:
        code, rss_kib = wait_rusage(p, timeout)
        summary = next((ln for ln in p.log_lines() if "wake-ups armed" in ln), "")
        out["per_creator"].append(
            {
                "exit": code,
                "peak_rss_mb": round(rss_kib / 1024, 1),
                "summary": summary or p.log_lines()[-3:],
                "pass_seconds": _num(r"; ([\d.]+) s", summary),
                "inserted": _num(r"(\d+) new", summary),
                "existing": _num(r"(\d+) already there", summary),
                "wakeups": _num(r"(\d+) wake-ups armed", summary),
                "exited_after_s": round(time.perf_counter() - t0, 2),
            }
        )
    per = out["per_creator"]
    out["wall_seconds"] = round(time.perf_counter() - t0, 2)
    # The planning itself: the longest pass (each --once first waits one heartbeat, 2 s here).
    out["pass_seconds"] = max((c["pass_seconds"] or 0.0) for c in per)
    out["peak_rss_mb_max"] = max(c["peak_rss_mb"] for c in per)
    out["inserted"] = sum(c["inserted"] or 0 for c in per)
    out["existing"] = sum(c["existing"] or 0 for c in per)
    out["wakeups"] = sum(c["wakeups"] or 0 for c in per)
    out.update(check_once(st, expected))
    return out


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def st_tzpush() -> str:
    from bench.stack import TZPUSH

    return str(TZPUSH)


def check_once(st: BenchStack, expected: int | None) -> Doc:
    """One message document per occurrence (ids are deterministic), none missing."""
    msgs = st.db[dbm.MESSAGES]
    n = msgs.estimated_document_count()
    pending = msgs.count_documents({"status": "pending"})
    in_progress = st.db[dbm.PARTITIONS].count_documents({"inProgress": {"$exists": True}})
    out: Doc = {"messages": n, "pending": pending, "windows_in_progress": in_progress}
    if expected is not None:
        out["missing"] = expected - n
        out["exactly_once"] = n == expected and in_progress == 0
    return out


def insert_floor(st: BenchStack, batch: int = 5000) -> float:
    """The database's own time to insert the same documents with the same indexes, streamed."""
    scratch = st.client[f"{st.dbname}_floor"]["notification_messages"]
    scratch.create_indexes(dbm.index_plan()[dbm.MESSAGES])
    took = 0.0
    cursor = st.db[dbm.MESSAGES].find().batch_size(batch)
    docs: list[Doc] = []
    for d in cursor:
        docs.append(d)
        if len(docs) == batch:
            t = time.perf_counter()
            scratch.insert_many(docs, ordered=False)
            took += time.perf_counter() - t
            docs = []
    if docs:
        t = time.perf_counter()
        scratch.insert_many(docs, ordered=False)
        took += time.perf_counter() - t
    return round(took, 2)


def check_all_planned(st: BenchStack, reminders: int) -> Doc:
    """Every reminder has its occurrence (none lost) and no occurrence has two messages.

    The survivor plans the dead creator's partitions from its own ``now``, so a reminder due
    between the two passes' starts has today's occurrence (from the dead pass) and tomorrow's
    (from the survivor's): two occurrences, not a duplicate; hence per reminder, not a count.
    """
    seen: set[str] = set()
    occurrences: set[tuple[str, str]] = set()
    dup = 0
    for d in st.db[dbm.MESSAGES].find({}, {"reminderId": 1, "localDate": 1}).batch_size(20000):
        key = (d["reminderId"], d["localDate"])
        dup += key in occurrences
        occurrences.add(key)
        seen.add(d["reminderId"])
    in_progress = st.db[dbm.PARTITIONS].count_documents({"inProgress": {"$exists": True}})
    return {
        "messages": len(occurrences) + dup,
        "reminders_without_message": reminders - len(seen),
        "duplicate_occurrences": dup,
        "windows_in_progress": in_progress,
        "done": len(seen) == reminders and in_progress == 0,
    }


def run_killed(st: BenchStack, reminders: int, interval: int, timeout: float) -> Doc:
    """Two creator services; one killed mid-pass; the other finishes its partitions."""
    env = _env(
        st,
        TZPUSH_CREATOR__INTERVAL_SECONDS=str(interval),
        TZPUSH_CREATOR__LEASE_SECONDS=str(interval / 3),
    )
    procs = []
    for name in ("scale-svc-a", "scale-svc-b"):
        p = Proc(name, [st_tzpush(), "creator"], env, st.log_dir / f"{name}.log")
        st.procs.append(p)
        procs.append(p.start())
    a, b = procs
    try:
        # Kill A once a third of the occurrences are in the database (both mid-pass).
        deadline = time.time() + timeout
        while st.db[dbm.MESSAGES].estimated_document_count() < reminders / 3:
            if time.time() > deadline:
                raise TimeoutError("no planning progress")
            time.sleep(0.5)
        held = {
            d["p"]
            for d in st.db[dbm.PARTITIONS].find({"owner": {"$regex": f":{a.pid}:"}}, {"p": 1})
        }
        a.kill9()
        killed_at = time.time()
        at_kill = st.db[dbm.MESSAGES].estimated_document_count()
        while st.db[dbm.PARTITIONS].count_documents(
            {"$or": [{"inProgress": {"$exists": True}}, {"plannedUntil": None}]}
        ):
            if time.time() > killed_at + timeout:
                raise TimeoutError("the killed creator's partitions were not finished")
            time.sleep(1.0)
        finished = time.time() - killed_at
        done = check_all_planned(st, reminders)
        owners = {d.get("owner") for d in st.db[dbm.PARTITIONS].find({"p": {"$in": sorted(held)}})}
    finally:
        b.stop()
    return {
        "interval_s": interval,
        "lease_s": interval / 3,
        "killed_partitions": sorted(held),
        "messages_at_kill": at_kill,
        "finished_s_after_kill": round(finished, 1),
        "within_one_interval": finished <= interval,
        "owners_after": sorted(str(o) for o in owners),
        **done,
        "survivor_log": [ln for ln in b.log_lines() if "partitions" in ln][-4:],
    }


def run_idle(st: BenchStack, seconds: float = 60.0) -> Doc:
    """A creator service on the planned data: what a minute costs the database."""
    env = _env(st, TZPUSH_CREATOR__INTERVAL_SECONDS="10")
    p = Proc("scale-idle", [st_tzpush(), "creator"], env, st.log_dir / "scale-idle.log")
    st.procs.append(p)
    p.start()
    try:
        p.wait_log("planning pass", 600)
        time.sleep(2)
        before = dict(st.client.admin.command("serverStatus")["opcounters"])
        time.sleep(seconds)
        after = dict(st.client.admin.command("serverStatus")["opcounters"])
    finally:
        p.stop()
    delta = {k: after[k] - before.get(k, 0) for k in after}
    delta["command"] -= 1
    return {"seconds": seconds, "opcounters": delta, "creator_pass_every_s": 10}


def run_scale(
    st: BenchStack,
    n_users: int,
    seed_: int,
    creators: tuple[int, ...] = (1, 2, 4),
    *,
    kill_interval: int = 120,
    fresh: bool = True,
) -> Doc:
    """Everything above at ``n_users`` users (2 reminders each)."""
    out: Doc = {"users": n_users}
    timeout = max(600.0, n_users / 100)
    now = dt.datetime.now(dt.UTC)
    expected: int | None = None
    for k in creators:
        st.wipe(f"scale{k}", fresh_server=fresh)
        n, seed_s = seed(st, n_users, seed_, now)
        out["reminders"] = n
        res = run_creators(st, k, expected, timeout)
        res["seed_seconds"] = round(seed_s, 1)
        if expected is None:
            # One creator: one message per reminder (a daily local time occurs once in 24 h
            # away from DST changes); the others must make exactly the same set.
            expected = res["messages"]
            res["messages_per_reminder"] = round(expected / n, 4)
            res.update(check_once(st, expected))
            out[f"creators_{k}"] = res  # kept whatever a later step does
            res["floor_seconds"] = insert_floor(st)
            res["ratio_to_floor"] = round(res["pass_seconds"] / res["floor_seconds"], 2)
            try:
                out["idle"] = run_idle(st)
            except Exception as exc:  # keep the figures measured above
                out["idle"] = {"error": f"{type(exc).__name__}: {exc}"}
        out[f"creators_{k}"] = res
    if kill_interval and expected is not None:
        st.wipe("scalekill", fresh_server=fresh)
        n, _ = seed(st, n_users, seed_, now)
        try:
            out["killed"] = run_killed(st, n, kill_interval, timeout)
        except Exception as exc:  # keep the figures measured above
            out["killed"] = {"error": f"{type(exc).__name__}: {exc}"}
    base = out.get("creators_1", {}).get("pass_seconds")
    for k in creators:
        if base and k != 1:
            res = out[f"creators_{k}"]
            res["time_vs_1"] = round(res["pass_seconds"] / base, 2)
    return out
