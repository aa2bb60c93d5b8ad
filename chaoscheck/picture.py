"""The run as one picture: faults as bands per target, pushes as points (lateness), violations
marked in red."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaoscheck.invariants import Run, _ts, placed, push_time


def draw(run: Run, report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = float(run.meta["workload_start"])
    targets = sorted({str(f["target"]) for f in run.faults})
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(12, 6), sharex=True, gridspec_kw={"height_ratios": [1, 2]}
    )
    colors = {
        "kill9": "tab:red",
        "term": "tab:orange",
        "stop": "tab:purple",
        "clock": "tab:brown",
        "net": "tab:blue",
        "expo": "tab:green",
    }
    for f in run.faults:
        y = targets.index(str(f["target"]))
        start, end = _ts(f["start"]) - t0, max(_ts(f["end"]), _ts(f["start"]) + 0.5) - t0
        top.barh(
            y,
            end - start,
            left=start,
            height=0.7,
            color=colors.get(str(f["kind"]).split("_")[0], "grey"),
            alpha=0.7,
        )
    top.set_yticks(range(len(targets)), targets, fontsize=7)
    top.set_title(
        f"seed {run.meta.get('seed')}: faults (kill9 red, term orange, stop purple, "
        "clock brown, net blue, expo green)",
        fontsize=9,
    )
    xs, ys = [], []
    for p in run.pushes:
        where = placed(run, p)
        if where and where.get("due"):
            xs.append(push_time(p) - t0)
            ys.append(push_time(p) - where["due"])
    bottom.scatter(xs, ys, s=4, color="tab:blue", label=f"pushes ({len(xs)})")
    vx, vy = [], []
    for v in report["verdicts"]:
        for bad in v["violations"]:
            p = bad.get("push") or (bad.get("pushes") or [None])[-1]
            if p:
                vx.append(push_time(p) - t0)
                vy.append(0)
    if vx:
        bottom.scatter(vx, vy, s=40, marker="x", color="red", label=f"violations ({len(vx)})")
    bottom.set_yscale("symlog", linthresh=1)
    bottom.set_ylim(bottom=0)
    bottom.set_xlim(0, float(run.meta["cutoff"]) - t0 + max(run.meta.get("grace", {0: 0}).values()))
    bottom.set_ylabel("arrival after due (s)")
    bottom.set_xlabel("seconds since the workload started")
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
