"""Scenario ``scale`` (issue 18): planning at scale, one creator and several, and a creator killed.

Opt-in (``--only scale``; not in the default run: at 1M reminders it takes well over 15 min).
Sizes: ``--scale-users`` (2 reminders and one token each; default 500,000 = 1M reminders).

- ``creators_1``, ``creators_2``, ...: ``tzpush creator --once`` processes started together on
  the same seeded data (a restored copy of the server's files each time), each one's own peak
  RSS (through ``bench/peak.py``), its pass summary, and the wall time until all exited; every
  expected occurrence planned exactly once (one document per deterministic id, none missing).
- ``floor``: the database's own insert of the same message documents (same indexes, batches of
  5,000, read from a dump of what the creator wrote) into the same collection on the same
  restored seed, against which the one-creator pass is set.
- ``killed``: two creator services (interval ``kill_interval`` s, lease a third of it);
  one is killed (SIGKILL) once part of its partitions is inserted; the other takes the dead
  one's partitions after its lease and finishes them: the time from the kill until every
  occurrence is planned and no window is left in progress, 0 lost, 0 duplicates.
- ``idle``: a creator service on the planned data for a minute: the database's opcounters.
- ``ops``: on the planned data, operator reads timed: ``tzpush stats --json``, ``tzpush doctor``,
  the console's overview, upcoming and problems figures, a user's page of messages.
- ``herd``: on the planned data, ``--scale-herd`` more users (100,000) with one message each,
  all due at one instant (``bench/scenarios_herd.py``): lateness at the fake (unlimited rate),
  when every one of them is terminal in the database, the consumer's peak RSS.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import bson

from bench import workload
from bench.scenarios_herd import run_herd
from bench.stack import BenchStack, Proc
from shared.store import db as dbm

Doc = dict[str, Any]
PREFIX = "scale"
PEAK = Path(__file__).with_name("peak.py")
DBNAME = "scale"
SNAPSHOT = "scale-seeded"
LEASE_S = 6.0  # the bench's creators: a heartbeat every 2 s, so --once waits 2 s to start


def seed(st: BenchStack, n_users: int, seed_: int, now: dt.datetime) -> tuple[int, float]:
    """The workload (each document with its bucket, as the management code writes it)."""
    users, tokens, reminders = workload.population(n_users, 2, seed_, PREFIX, now)
    t = time.perf_counter()
    workload.seed_population(st.db, users, tokens, reminders)
    return len(reminders), time.perf_counter() - t


def _env(st: BenchStack, **extra: str) -> dict[str, str]:
    settings = st.settings_for(PREFIX)
    return st.env(settings, **{"TZPUSH_CREATOR__LEASE_SECONDS": str(LEASE_S), **extra})


def wait_peak(p: Proc, peak_file: Path, timeout: float) -> tuple[int, int]:
    """Wait for a child started through ``bench/peak.py``; its exit code and its own peak RSS
    in KiB (``ru_maxrss`` as the small launcher saw it: see bench/peak.py for why)."""
    assert p.popen is not None
    try:
        code = p.popen.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill9()
        raise TimeoutError(f"{p.name} still running after {timeout} s") from None
    peak = json.loads(peak_file.read_text(encoding="utf-8"))
    return code, int(peak["maxrss_kib"])


def measured(argv: list[str], peak_file: Path) -> list[str]:
    """``argv`` run by the peak-RSS launcher (a fresh interpreter, standard library only)."""
    return [sys.executable, "-I", str(PEAK), str(peak_file), "--", *argv]


def run_creators(st: BenchStack, k: int, expected: int | None, timeout: float) -> Doc:
    """``k`` ``tzpush creator --once`` processes at once on the current database."""
    procs = []
    t0 = time.perf_counter()
    for i in range(k):
        name = f"scale-once-{k}-{i}"
        peak = st.log_dir / f"{name}.peak.json"
        peak.unlink(missing_ok=True)
        argv = measured([st_tzpush(), "creator", "--once"], peak)
        p = Proc(name, argv, _env(st), st.log_dir / f"{name}.log")
        st.procs.append(p)
        procs.append((p.start(), peak))
    out: Doc = {"creators": k, "per_creator": []}
    for p, peak in procs:
        code, rss_kib = wait_peak(p, peak, timeout)
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


def dump_messages(st: BenchStack, path: Path) -> int:
    """The planned messages, as BSON, to a local file (for ``insert_floor``); how many."""
    n = 0
    with open(path, "wb") as f:
        for d in st.db[dbm.MESSAGES].find().batch_size(5000):
            f.write(bson.encode(d))
            n += 1
    return n


def insert_floor(st: BenchStack, path: Path, batch: int = 5000) -> float:
    """The database's own time to insert the same documents (read from ``path``), in batches
    of ``batch``, into the collection the creator wrote them to, with the same indexes, on the
    same server state (restored from the seeded snapshot)."""
    coll = st.db[dbm.MESSAGES]
    took = 0.0
    docs: list[Doc] = []
    with open(path, "rb") as f:
        for d in bson.decode_file_iter(f):
            docs.append(d)
            if len(docs) == batch:
                t = time.perf_counter()
                coll.insert_many(docs, ordered=False)
                took += time.perf_counter() - t
                docs = []
    if docs:
        t = time.perf_counter()
        coll.insert_many(docs, ordered=False)
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


def run_ops(st: BenchStack) -> Doc:
    """Operator reads on the planned data, each timed with what it answered: ``tzpush stats
    --json`` and ``tzpush doctor`` as an operator runs them (their own settings, the driver's
    timeouts), the console's pages' figures through the same connection settings the API uses,
    and a user's first page of messages. ``doctor`` exits 1 when any check fails, which is
    about the stack, not about time: its exit is recorded, not counted as a failed read."""
    from api.console import figures
    from api.views import messages_page

    out: Doc = {}
    env = _env(st)
    for name, argv in (("stats", ["stats", "--json"]), ("doctor", ["doctor"])):
        t = time.perf_counter()
        try:
            r = subprocess.run(
                [st_tzpush(), *argv], env=env, capture_output=True, text=True, timeout=1800
            )
        except subprocess.TimeoutExpired:
            out[name] = {"seconds": round(time.perf_counter() - t, 1), "error": "over 30 min"}
            continue
        res: Doc = {"seconds": round(time.perf_counter() - t, 1), "exit": r.returncode}
        if name == "stats" and r.returncode == 0:
            res["messages"] = json.loads(r.stdout)["messages"]
        elif r.returncode:
            res["tail"] = (r.stderr or r.stdout).strip().splitlines()[-3:]
            if name == "stats":
                res["error"] = "exit " + str(r.returncode)
        out[name] = res
    settings = st.settings_for(PREFIX)
    database = dbm.connect(settings.mongo)
    now = dt.datetime.now(dt.UTC)
    user = st.db[dbm.USERS].find_one({}, {"_id": 1}) or {"_id": ""}
    reads: dict[str, Any] = {
        "console_overview_24h": lambda: figures.overview(
            database, settings, now - dt.timedelta(hours=24), now
        ),
        "console_upcoming": lambda: figures.upcoming(database, settings, now),
        "console_problems": lambda: figures.problems(database, figures.ProblemFilter()),
        "user_messages_page": lambda: messages_page(database, user["_id"], limit=1),
    }
    try:
        for name, read in reads.items():
            t = time.perf_counter()
            try:
                read()
                out[name] = {"seconds": round(time.perf_counter() - t, 2)}
            except Exception as exc:  # what an operator would have seen
                out[name] = {
                    "seconds": round(time.perf_counter() - t, 2),
                    "error": f"{type(exc).__name__}: {exc}"[:300],
                }
    finally:
        database.client.close()
    return out


# The steps of the scenario, in the order they run. ``idle``, ``herd``, ``floor`` and
# ``creators`` need ``once`` (the one-creator plan they work on, the dump the floor inserts, the
# messages each creator count must make). ``herd`` changes the planned data (its own users, and
# 10,000 planned messages its outcome floor marks sent): only ``floor`` and later steps, which
# start from a restored seed, may follow it.
STEPS = ("once", "idle", "ops", "herd", "floor", "creators", "kill")


def run_scale(
    st: BenchStack,
    n_users: int,
    seed_: int,
    creators: tuple[int, ...] = (1, 2, 4),
    *,
    kill_interval: int = 120,
    herd: int = 100_000,
    herd_lead: float = 30.0,
    fresh: bool = True,
    steps: tuple[str, ...] = STEPS,
    seeded: Path | None = None,
) -> Doc:
    """Everything above at ``n_users`` users (2 reminders each).

    The seeded database is kept as a copy of the server's files (``BenchStack.snapshot``) and
    every later step starts from a restored copy: the same state for each, without seeding
    again (7 to 20 minutes at 1M here). Order: one creator's pass; its messages dumped; the
    idle minute and the herd on the planned data; the floor (the same messages inserted by the
    database alone, on a restored seed: the state the creator wrote into); 2, 4 creators; the
    kill drill.

    ``steps``: a subset of ``STEPS`` (a rerun of what failed). ``seeded``: a copy of the
    server's files holding this seed, used instead of seeding; it is read, never changed. If it
    does not exist yet, this run seeds and keeps its copy there for the next."""
    bad = [s for s in steps if s not in STEPS]
    if bad:
        raise ValueError(f"unknown scale step(s) {bad}; choose from {STEPS}")
    if {"idle", "ops", "herd", "floor", "creators"} & set(steps) and "once" not in steps:
        raise ValueError(
            "the steps idle, ops, herd, floor and creators need the step once (the plan)"
        )
    out: Doc = {"users": n_users, "steps": list(steps)}
    timeout = max(600.0, n_users / 100)
    now = dt.datetime.now(dt.UTC)
    st.wipe(DBNAME, fresh_server=fresh)
    if seeded is not None and seeded.exists():
        snapshot = str(seeded.resolve())
        out["seeded_from"] = snapshot
        out["restore_seconds"] = round(st.restore(snapshot, st.dbname), 1)
        n = st.db[dbm.REMINDERS].estimated_document_count()
        planned = st.db[dbm.MESSAGES].estimated_document_count()
        if st.db[dbm.USERS].estimated_document_count() != n_users or n != 2 * n_users or planned:
            raise ValueError(
                f"{seeded} does not hold {n_users:,} seeded users and nothing planned in "
                f"{st.dbname} (a copy taken after seeding, before any step)"
            )
    else:
        snapshot = SNAPSHOT
        n, seed_s = seed(st, n_users, seed_, now)
        out["seed_seconds"] = round(seed_s, 1)
        out["snapshot_seconds"] = round(st.snapshot(SNAPSHOT), 1)
        if seeded is not None:
            shutil.copytree(st.snapshot_dir(SNAPSHOT), seeded)
            out["seed_kept_in"] = str(seeded.resolve())
    out["reminders"] = n
    dump = st.log_dir / "scale-messages.bson"
    expected: int | None = None
    try:
        if "once" in steps:
            res = run_creators(st, 1, None, timeout)
            # One creator: one message per reminder (a daily local time occurs once in 24 h away
            # from DST changes); the others must make exactly the same set.
            expected = int(res["messages"])
            res["messages_per_reminder"] = round(expected / n, 4)
            res.update(check_once(st, expected))
            out["creators_1"] = res  # kept whatever a later step does
            if "floor" in steps:
                dump_messages(st, dump)
            if "idle" in steps:
                try:
                    out["idle"] = run_idle(st)
                except Exception as exc:  # keep the figures measured above
                    out["idle"] = {"error": f"{type(exc).__name__}: {exc}"}
            if "ops" in steps:
                try:
                    out["ops"] = run_ops(st)
                except Exception as exc:  # keep the figures measured above
                    out["ops"] = {"error": f"{type(exc).__name__}: {exc}"}
            if herd and "herd" in steps:
                try:
                    out["herd"] = run_herd(
                        st,
                        herd,
                        seed_,
                        "scaleherd",
                        lead=herd_lead,
                        terminal_wait=300.0,
                        floor_sample=10_000,
                    )
                except Exception as exc:
                    out["herd"] = {"error": f"{type(exc).__name__}: {exc}"}
            if "floor" in steps:
                st.restore(snapshot, st.dbname)
                res["floor_seconds"] = insert_floor(st, dump)
                res["ratio_to_floor"] = round(res["pass_seconds"] / res["floor_seconds"], 2)
                dump.unlink(missing_ok=True)
        for k in creators if "creators" in steps else ():
            if k == 1:
                continue
            st.restore(snapshot, st.dbname)
            out[f"creators_{k}"] = run_creators(st, k, expected, timeout)
        if kill_interval and "kill" in steps:
            st.restore(snapshot, st.dbname)
            try:
                out["killed"] = run_killed(st, n, kill_interval, timeout)
            except Exception as exc:  # keep the figures measured above
                out["killed"] = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        dump.unlink(missing_ok=True)
        if snapshot == SNAPSHOT:
            st.drop_snapshot(SNAPSHOT)
    base = out.get("creators_1", {}).get("pass_seconds")
    for k in creators:
        if base and k != 1 and f"creators_{k}" in out:
            res = out[f"creators_{k}"]
            res["time_vs_1"] = round(res["pass_seconds"] / base, 2)
    return out
