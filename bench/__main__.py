"""``python -m bench`` (``make bench``): tzpush on its own local stack with the Expo fake.

    python -m bench [--quick] [--sizes full|quick|tiny] [--only plan,herd,...] [--out DIR]
    python -m bench chaos --seed S --minutes M [--schedule FILE]   (bench/chaos.py)

Scenarios: plan, herd, outage, limited_herd, idle (needs plan), drills, api; and ``scale``
(opt-in, only with ``--only scale``: 1M reminders by default, over 15 min). Writes
``DIR/<timestamp>.json`` and ``DIR/<timestamp>.png`` and prints a table. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import report
from bench.scenarios_api import run_api
from bench.scenarios_drills import DRILLS as BASE_DRILLS
from bench.scenarios_failover import DRILLS as FAILOVER_DRILLS
from bench.scenarios_health import run_health
from bench.scenarios_herd import run_herd, run_outage
from bench.scenarios_hostile import DRILLS as HOSTILE_DRILLS
from bench.scenarios_plan import run_idle, run_plan
from bench.scenarios_scale import STEPS as SCALE_STEPS
from bench.scenarios_scale import run_scale
from bench.stack import STATE_DIR, bench_stack, interpreters

DRILLS = {**BASE_DRILLS, **HOSTILE_DRILLS, **FAILOVER_DRILLS}
SCENARIOS = ("plan", "idle", "herd", "limited_herd", "outage", "drills", "api", "health")
OPT_IN = ("scale",)  # run only when named in --only (too long for the default run)
# users (2 reminders each), herd, outage, drill herd, two-creators reminders, idle s, outage s,
# lead s (capped at 10 for the outage and the drills), fresh: a new database server per
# scenario (default 1); api: users onboarded through POST /v1/batch (one device, two reminders
# each), api_logins: logins (PUT device) under 20 concurrent clients
SIZES: dict[str, dict[str, float]] = {
    "full": dict(
        users=50_000,
        herd=10_000,
        outage=1000,
        drill=2000,
        creators=1000,
        idle=60,
        off=30,
        lead=15,
        api=10_000,
        api_logins=4000,
        health_users=45,
        health_reminders=100,
    ),
    # quick and tiny reuse one database server (a new database per scenario): at their sizes
    # the server's slow-down as it fills is small, and a restart per scenario costs 5 s each.
    "quick": dict(
        users=2500,
        herd=1000,
        outage=500,
        drill=200,
        creators=200,
        idle=5,
        off=5,
        lead=4,
        fresh=0,
        api=1000,
        api_logins=1000,
        health_users=45,
        health_reminders=100,
    ),
    "tiny": dict(
        users=50,
        herd=50,
        outage=30,
        drill=30,
        creators=20,
        idle=3,
        off=2,
        lead=3,
        fresh=0,
        api=50,
        api_logins=200,
        health_users=6,
        health_reminders=10,
    ),
}


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["chaos"]:
        from bench import chaos

        return chaos.main(args_in[1:])
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (under 3 minutes)")
    ap.add_argument("--sizes", choices=sorted(SIZES), help="size set (default full, or quick)")
    ap.add_argument("--only", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--drills", help=f"comma-separated subset of {','.join(DRILLS)}")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale-users", type=int, default=500_000, help="scale: users (2 reminders)")
    ap.add_argument("--scale-creators", default="1,2,4", help="scale: creator counts to run")
    ap.add_argument(
        "--scale-kill-interval",
        type=int,
        default=120,
        help="scale: creator interval s (0: no kill)",
    )
    ap.add_argument(
        "--scale-herd",
        type=int,
        default=100_000,
        help="scale: users due at one instant after the plan (0: no herd)",
    )
    ap.add_argument(
        "--scale-herd-lead",
        type=float,
        default=30.0,
        help="scale: the herd's lead time s (wake-ups fire this long before due)",
    )
    ap.add_argument(
        "--scale-steps",
        default=",".join(SCALE_STEPS),
        help=f"scale: a subset of {','.join(SCALE_STEPS)} (idle, ops, herd, floor need once)",
    )
    ap.add_argument(
        "--scale-seeded",
        type=Path,
        help="scale: a kept copy of the bench server's files holding this seed (skips seeding); "
        "if it does not exist, the run seeds and keeps its copy there",
    )
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    size = SIZES[args.sizes or ("quick" if args.quick else "full")]
    only = [s.strip() for s in (args.only or ",".join(SCENARIOS)).split(",") if s.strip()]
    bad = [s for s in only if s not in SCENARIOS + OPT_IN]
    if bad:
        ap.error(f"unknown scenario(s) {bad}; choose from {SCENARIOS + OPT_IN}")
    drills = [d.strip() for d in (args.drills or ",".join(DRILLS)).split(",") if d.strip()]
    logging.basicConfig(level=logging.WARNING)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    results: dict[str, Any] = {"started": stamp, "sizes": size, "seed": args.seed, "scenarios": {}}
    results["command"] = " ".join(["python -m bench", *(argv or sys.argv[1:])])
    results["python"] = interpreters()
    sc = results["scenarios"]
    t0 = time.time()
    fresh = bool(size.get("fresh", 1))
    with bench_stack(STATE_DIR / "logs" / stamp) as st:
        seed = args.seed

        def step(name: str, fn: Any, *a: Any, **kw: Any) -> None:
            print(f"[{time.time() - t0:6.1f} s] {name} ...", flush=True)
            try:
                sc[name] = fn(*a, **kw)
            except Exception as exc:
                traceback.print_exc()
                sc[name] = {"error": f"{type(exc).__name__}: {exc}"}

        if "plan" in only:
            st.wipe("plan", fresh_server=fresh)
            gap = 4 + size["users"] / 5000
            step("plan", run_plan, st, int(size["users"]), seed, gap)
            if "idle" in only:
                step("idle", run_idle, st, size["idle"])
        for name, fn, kw in (
            ("herd", run_herd, {"lead": size["lead"]}),
            (
                "limited_herd",
                run_herd,
                {"fake_rate": 600, "client_rate": 600, "lead": size["lead"]},
            ),
        ):
            if name in only:
                st.wipe(name, fresh_server=fresh)
                step(name, fn, st, int(size["herd"]), seed, name.replace("_", ""), **kw)
        if "outage" in only:
            st.wipe("outage", fresh_server=fresh)
            lead = min(10.0, size["lead"])
            step("outage", run_outage, st, int(size["outage"]), seed, size["off"], lead=lead)
        if "drills" in only:
            sc["drills"] = {}
            for name in drills:
                st.wipe(name, fresh_server=fresh)
                n = int(
                    size["creators"] if name in ("two_creators", "skipped_pass") else size["drill"]
                )
                print(f"[{time.time() - t0:6.1f} s] drill {name} ...", flush=True)
                try:
                    sc["drills"][name] = DRILLS[name](st, n, seed, min(10.0, size["lead"]))
                except Exception as exc:
                    traceback.print_exc()
                    sc["drills"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        if "api" in only:
            st.wipe("api", fresh_server=fresh)
            step("api", run_api, st, int(size["api"]), int(size["api_logins"]))
        if "health" in only:
            st.wipe("health", fresh_server=fresh)
            users, rems = int(size["health_users"]), int(size["health_reminders"])
            step("health", run_health, st, users, rems, min(45, users))
        if "scale" in only:
            ks = tuple(int(k) for k in args.scale_creators.split(",") if k.strip())
            step(
                "scale",
                run_scale,
                st,
                args.scale_users,
                seed,
                ks,
                kill_interval=args.scale_kill_interval,
                herd=args.scale_herd,
                herd_lead=args.scale_herd_lead,
                fresh=fresh,
                steps=tuple(s.strip() for s in args.scale_steps.split(",") if s.strip()),
                seeded=args.scale_seeded,
            )
    results["seconds"] = round(time.time() - t0, 1)
    path = out_dir / f"{stamp}.json"
    report.write_json(results, path)
    png = report.chart(results, out_dir / f"{stamp}.png")
    report.print_table(results)
    print(f"results: {path}" + (f", chart: {png}" if png else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
