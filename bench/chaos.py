"""``python -m bench chaos --seed S --minutes M``: a seeded workload under seeded faults, judged.

The run: start the system (`bench.chaos_sut`), write the fault schedule (`bench.chaos_faults`,
or replay one with ``--schedule``), play the workload (`bench.chaos_workload`) while the faults
happen, heal everything, let the run drain (every message due by the run's end leaves
``pending``, or the drain times out), read back what erased users left, dump the database and
what the Expo fake received, and hand the folder to the independent checker (`chaoscheck`).
Everything lands in ``--out/seed-S-<stamp>/``; the exit code is 1 on any violation.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pymongo

from bench import chaos_faults, chaos_workload
from bench.chaos_sut import DATABASE, GRACE, Sut
from bench.stack import REPO
from chaoscheck.run import check_dir

WINDOW_S = 1.0  # docs/architecture.md "Chaos": a change acknowledged this long before is honoured
DRAIN_S = max(GRACE.values()) + 60.0
OUT = REPO / ".local" / "chaos"
START_PHASE_S = 50.0  # the workload starts 10 s before a minute boundary


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return aware.isoformat()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _drain(db: Any, cutoff: float, deadline: float) -> int:
    """Wait until nothing due by ``cutoff`` is pending or sending; what is left when it ends."""
    due = dt.datetime.fromtimestamp(cutoff, dt.UTC)
    query = {"status": {"$in": ["pending", "sending"]}, "scheduledAt": {"$lte": due}}
    while True:
        try:
            left = db.notification_messages.count_documents(query)
        except pymongo.errors.PyMongoError:
            left = -1
        if left == 0 or time.time() > deadline:
            return left
        time.sleep(1.0)


def run(
    seed: int,
    minutes: float,
    out: Path,
    schedule: Path | None = None,
    users: int = 0,
    ops_per_s: float = 1.0,
) -> dict[str, Any]:
    """One chaos run; its folder holds everything the checker read, the report and the picture."""
    seconds = minutes * 60
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = out / f"seed-{seed}-{stamp}"
    run_dir.mkdir(parents=True)
    faults = chaos_faults.read(schedule) if schedule else chaos_faults.schedule(seed, seconds)
    chaos_faults.write(faults, run_dir / "schedule.json")
    users = users or max(40, int(20 * minutes))
    done: list[dict[str, Any]] = []
    with Sut(run_dir, seed) as sut:
        recorder = chaos_workload.Recorder(sut.api_url, {"app": sut.app_key, "ops": sut.ops_key})
        start = time.time() + 2.0
        start += (START_PHASE_S - start) % 60  # a replay's due instants fall as the seed's did
        ops = chaos_workload.plan(seed, start, seconds, users, ops_per_s)
        print(
            f"chaos seed {seed}: {len(ops)} requests, {len(faults)} faults, {minutes} min; "
            f"{run_dir}",
            flush=True,
        )

        def fault_thread(f: chaos_faults.Fault) -> None:
            time.sleep(max(0.0, start + f.at - time.time()))
            try:
                done.append(sut.do(f, start))
            except Exception as exc:  # a fault that could not be applied is recorded as such
                done.append(
                    {
                        "kind": f.kind,
                        "target": f.target,
                        "start": start + f.at,
                        "end": time.time(),
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )

        threads = [threading.Thread(target=fault_thread, args=(f,), daemon=True) for f in faults]
        for t in threads:
            t.start()
        chaos_workload.play(ops, start, recorder)
        for t in threads:
            t.join()
        cutoff = start + seconds
        time.sleep(max(0.0, cutoff - time.time()))
        sut.heal()
        client: pymongo.MongoClient[Any] = pymongo.MongoClient(
            sut.mongo_uri, tz_aware=True, serverSelectionTimeoutMS=30000
        )
        db = client[DATABASE]
        left = _drain(db, cutoff, time.time() + DRAIN_S)
        erased = {
            r["path"].split("/")[3]
            for r in recorder.records
            if r["method"] == "DELETE" and r["path"].count("/") == 3
        }
        for uid in sorted(erased):
            recorder.send("GET", f"/v1/users/{uid}")
            recorder.send("GET", f"/v1/users/{uid}/messages")
        dump = {
            name: [_jsonable(d) for d in db[name].find()] for name in db.list_collection_names()
        }
        client.close()
        pushes = httpx.get(sut.fake_url + "/_fake/pushes", timeout=60).json()
        recorder.write(run_dir / "history.jsonl")
        recorder.close()
    (run_dir / "db.json").write_text(json.dumps(dump, default=str))
    (run_dir / "pushes.json").write_text(json.dumps(pushes))
    (run_dir / "faults.jsonl").write_text(
        "".join(json.dumps(f, default=str) + "\n" for f in sorted(done, key=lambda f: f["start"]))
    )
    meta = {
        "seed": seed,
        "minutes": minutes,
        "window_s": WINDOW_S,
        "grace": GRACE,
        "workload_start": start,
        "cutoff": cutoff,
        "left_after_drain": left,
        "users": users,
        "requests_planned": len(ops),
    }
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    report = check_dir(run_dir)
    report["run_dir"] = str(run_dir)
    return report


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench chaos", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--schedule", type=Path, help="replay this schedule.json instead of the seed's")
    ap.add_argument("--users", type=int, default=0, help="users at the start (default 20/min)")
    ap.add_argument("--ops-per-s", type=float, default=1.0, help="changes per second meanwhile")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    # SIGTERM or SIGINT (also when started in the background, where SIGINT is ignored) unwind
    # the run, so every process it started is stopped by pid on the way out.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupted)
    report = run(args.seed, args.minutes, args.out, args.schedule, args.users, args.ops_per_s)
    print(f"{'ok' if report['ok'] else 'VIOLATIONS'}: {report['run_dir']}")
    return 0 if report["ok"] else 1
