"""Results: the JSON file, the table (rich) and the chart of lateness distributions (PNG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

Doc = dict[str, Any]
ARTICLE = {
    "plan": "100k schedulers in 14.3 s; Redis ~1041 B/reminder",
    "herd": "p50 1984 ms, p95 3416 ms, last 3559 ms",
    "outage": "1000 sent, 0 lost, 32.1 to 32.5 s late",
    "limited_herd": "(not measured)",
    "idle": "cron: full scan every minute, 26 ms at 100k, 131-141 ms at 1M",
    "api onboarding": "(not measured)",
    "api login": "(not measured)",
}


def write_json(results: Doc, path: Path) -> None:
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")


def _fmt_herd(r: Doc) -> str:
    return (
        f"sent {r['sent']}/{r['n']}, lost {r['lost']}, dup {r['duplicates']}; late p50 "
        f"{r['late_ms_p50']} ms, p95 {r['late_ms_p95']} ms, max {r['late_ms_max']} ms"
    )


def rows(results: Doc) -> list[tuple[str, str, str, str]]:
    """(scenario, tzpush, article, bar) rows for the table and docs/performance.md."""
    out = []
    sc = results.get("scenarios", {})
    if "plan" in sc and "error" not in sc["plan"]:
        p = sc["plan"]
        lt = p["localtime"]
        out.append(
            (
                "plan",
                f"{p['reminders']} reminders: {p['wall_seconds']} s ({p['wakeups']} wake-ups); "
                f"floor {p['floor_seconds']} s (x{p['ratio_to_floor']}); "
                f"broker {p['scheduler_bytes_per_reminder']} B/reminder, "
                f"db {p['db_bytes_per_reminder']} B/reminder "
                f"(storage {p['db_storage_bytes_per_reminder']}); localtime "
                f"{lt['per_item_us']} us/reminder cold",
                ARTICLE["plan"],
                "<= 1.3 x floor: " + ("ok" if p["bar_ok"] else "MISSED"),
            )
        )
    for name, bar in (("herd", "p95 < 1 s, 0 lost, 0 dup"), ("outage", "all within 1 s")):
        if name in sc and "error" not in sc[name]:
            r = sc[name]
            text = _fmt_herd(r)
            if name == "herd":
                text += f"; guards in {r['guards_in_after_fire_s']} s after firing"
                ok = (r["late_ms_p95"] or 1e9) < 1000 and r["lost"] == 0 and r["duplicates"] == 0
            else:
                text += f"; all sent {r['all_sent_after_restart_s']} s after restart"
                ok = r["lost"] == 0 and r["all_sent_after_restart_s"] <= 1.0
            out.append((name, text, ARTICLE[name], f"{bar}: {'ok' if ok else 'MISSED'}"))
    if "limited_herd" in sc and "error" not in sc["limited_herd"]:
        r = sc["limited_herd"]
        limit = r["n"] / 600 + 1.5
        ok = r["all_delivered_after_due_s"] <= limit and r["http_429"] == 0
        out.append(
            (
                "limited_herd",
                _fmt_herd(r) + f"; all in {r['all_delivered_after_due_s']} s, "
                f"{r['http_429']} x 429",
                ARTICLE["limited_herd"],
                f"<= {limit:.1f} s, no 429: {'ok' if ok else 'MISSED'}",
            )
        )
    if "idle" in sc and "error" not in sc["idle"]:
        r = sc["idle"]
        cp = r["creator_pass"]
        out.append(
            (
                "idle",
                f"ops in {r['seconds']:.0f} s: {r['opcounters']}; cpu {r['cpu_seconds']}; "
                f"a pass every {r['creator_pass_every_s']} s reads {cp['docs_read']} docs "
                f"({cp['wall_seconds']} s)",
                ARTICLE["idle"],
                "nothing grows with reminders: "
                + ("ok" if cp["docs_read"] < 1000 else "MISSED (pass scans)"),
            )
        )
    if "health" in sc and "error" not in sc["health"]:
        h = sc["health"]
        hz, zc = h["healthz"], h["zone_changes"]
        out.append(
            (
                "api health",
                f"{h['users']} zone changes of users with {h['reminders_per_user']} reminders, "
                f"{h['clients']} clients: /healthz p50 {hz['ms_p50']:.1f} ms, p99 "
                f"{hz['ms_p99']:.1f} ms, max {hz['ms_max']} ms; /readyz p99 "
                f"{h['readyz']['ms_p99']:.1f} ms; a change p50 {zc['ms_p50']:.0f} ms "
                f"({h['zone_change_ms_per_reminder']} ms a reminder), {len(h['errors'])} errors",
                "(not measured)",
                "/healthz p99 < 100 ms: " + ("ok" if h["health_bar_ok"] else "MISSED"),
            )
        )
    if "api" in sc and "error" not in sc["api"]:
        r = sc["api"]
        on, fl, lg = r["onboarding"], r["floor"], r["login"]
        out.append(
            (
                "api onboarding",
                f"{r['users']} users (1 device, 2 reminders each) via POST /v1/batch: "
                f"{on['seconds']} s ({on['items_per_s']} items/s, {on['failed_items']} failed); "
                f"floor {fl['seconds']} s for {sum(fl['documents'].values())} documents "
                f"(x{r['ratio_to_floor']})",
                ARTICLE["api onboarding"],
                "<= 1.5 x floor: " + ("ok" if r["onboarding_bar_ok"] else "MISSED"),
            )
        )
        out.append(
            (
                "api login",
                f"{lg['logins']} PUT device, {lg['clients']} clients: p50 {lg['ms_p50']} ms, "
                f"p95 {lg['ms_p95']} ms, max {lg['ms_max']} ms ({lg['per_s']}/s, "
                f"{lg['errors']} errors)",
                ARTICLE["api login"],
                "p95 < 100 ms: " + ("ok" if r["login_bar_ok"] else "MISSED"),
            )
        )
    if "scale" in sc and "error" not in sc["scale"]:
        out += _scale_rows(sc["scale"])
    for name, r in (sc.get("drills") or {}).items():
        if "error" in r:
            out.append((f"drill {name}", f"error: {r['error']}", "", ""))
        elif name == "skipped_pass":
            d, c = r["down_3h"], r["control_down_70min"]
            out.append(
                (
                    f"drill {name}",
                    f"down 3 h: planned {d['planned']}/{r['reminders']}, lost {d['lost']} "
                    f"(no trace in the db); control 70 min: lost {c['lost']}",
                    "",
                    "0 lost: " + ("ok" if d["lost"] == 0 else "MISSED"),
                )
            )
        elif name == "sigterm_all_down":
            ok = r["within_deadline"]
            out.append(
                (
                    f"drill {name}",
                    f"exit {r['exit_code']} after {r['exit_seconds']} s holding "
                    f"{r['held_guards']} guards",
                    "",
                    f"exit within {r['deadline_s']} s: " + ("ok" if ok else "NO"),
                )
            )
        else:
            ok = not r["lost"] and not r["duplicates"] and r["terminal"]
            bar = "0 lost, 0 dup, terminal"
            for key, label in EXTRA_BARS.items():
                if key in r:
                    ok = ok and EXTRA_BARS_OK[key](r)
                    bar += f", {label}"
            extra = "; ".join(f"{k} {r[k]}" for k in EXTRA_FIGURES if k in r)
            out.append(
                (
                    f"drill {name}",
                    f"sent {r['sent']}/{r['n']}, lost {r['lost']}, dup {r['duplicates']}, "
                    f"terminal {r['terminal']}; {r['statuses']}" + (f"; {extra}" if extra else ""),
                    "",
                    f"{bar}: " + ("ok" if ok else "NO"),
                )
            )
    for name, r in sc.items():
        if isinstance(r, dict) and "error" in r and name != "drills":
            out.append((name, f"error: {r['error']}", "", ""))
    return out


def print_table(results: Doc) -> None:
    table = Table(title=f"tzpush bench {results.get('started', '')}", show_lines=True)
    for col in ("scenario", "tzpush", "article (BullMQ/cron)", "bar"):
        table.add_column(col, overflow="fold")
    for row in rows(results):
        table.add_row(*row)
    Console(width=160).print(table)


def chart(results: Doc, path: Path) -> Path | None:
    """Lateness distributions (sorted lateness per message) of the herd-like scenarios."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = results.get("scenarios", {})
    series = {
        k: sc[k]["lateness_ms"]
        for k in ("herd", "limited_herd", "outage")
        if isinstance(sc.get(k), dict) and sc[k].get("lateness_ms")
    }
    if not series:
        return None
    fig, axes = plt.subplots(1, len(series), figsize=(5 * len(series), 4), squeeze=False)
    for ax, (name, late) in zip(axes[0], series.items(), strict=True):
        ax.hist([x / 1000 for x in late], bins=50)
        ax.set_title(f"{name} (n={len(late)})")
        ax.set_xlabel("lateness at the fake (s)")
        ax.set_ylabel("messages")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def markdown(results: Doc) -> str:
    """The table as Markdown (for docs/performance.md)."""
    lines = ["| scenario | tzpush | article (BullMQ / cron) | bar |", "|---|---|---|---|"]
    for row in rows(results):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in row) + " |")
    return "\n".join(lines)


# Drills with a bar of their own beside "0 lost, 0 dup, terminal" (issues 14 and 15).
EXTRA_BARS = {
    "http_429": "0 x 429 and all within n/600 + 2 s",
    "within_grace": "all within grace",
    "pushes_to_previous_user": "0 pushes to the previous user",
    "consumer_alive": "consumer alive, good reminders planned",
}
EXTRA_BARS_OK = {
    "http_429": lambda r: r["http_429"] == 0 and r["within_bar"],
    "within_grace": lambda r: r["within_grace"],
    "pushes_to_previous_user": lambda r: r["pushes_to_previous_user"] == 0,
    "consumer_alive": lambda r: r["consumer_alive"] and r["good_reminders_planned"] > 0,
}
EXTRA_FIGURES = (
    "kill1_standby_active_s",
    "kill2_standby_active_s",
    "kill1_consumer_back_s",
    "kill2_consumer_back_s",
    "kill_to_first_send_s",
    "http_429",
    "all_delivered_after_s",
    "bar_s",
    "late_ms_p95",
    "handed_over",
    "pushes_to_previous_user",
    "good_reminders_planned",
    "creator_exit",
)


def _scale_rows(r: Doc) -> list[tuple[str, str, str, str]]:
    """Issue 18's bars: x1.3 of the floor, RSS < 300 MB, several creators, the kill, the herd."""
    rows: list[tuple[str, str, str, str]] = []
    one = r.get("creators_1")
    if one:
        ratio = one.get("ratio_to_floor")
        rss = one["peak_rss_mb_max"]
        rows.append(
            (
                "scale: 1 creator",
                f"{r['reminders']} reminders: pass {one['pass_seconds']} s, floor "
                f"{one.get('floor_seconds')} s (x{ratio}); peak RSS {rss} MB; "
                f"exactly once: {one.get('exactly_once')}",
                "",
                f"<= x1.3: {'ok' if ratio and ratio <= 1.3 else 'MISSED'}; "
                f"RSS < 300 MB: {'ok' if rss < 300 else 'MISSED'}",
            )
        )
    for k in (2, 4, 8):
        c = r.get(f"creators_{k}")
        if c:
            rows.append(
                (
                    f"scale: {k} creators",
                    f"pass {c['pass_seconds']} s (x{c.get('time_vs_1')} of one); peak RSS "
                    f"{c['peak_rss_mb_max']} MB; missing {c.get('missing')}",
                    "",
                    "exactly once: " + ("ok" if c.get("exactly_once") else "MISSED"),
                )
            )
    kd = r.get("killed")
    if kd:
        text = (
            f"error: {kd['error']}"
            if "error" in kd
            else f"finished {kd['finished_s_after_kill']} s after the kill (interval "
            f"{kd['interval_s']} s); lost {kd['reminders_without_message']}, duplicates "
            f"{kd['duplicate_occurrences']}"
        )
        ok = "error" not in kd and kd["done"] and kd["within_one_interval"]
        rows.append(("scale: creator killed", text, "", "ok" if ok else "MISSED"))
    ops = r.get("ops")
    if ops:
        parts = [
            f"{name} {v['seconds']} s"
            + (" (FAILED)" if v.get("error") else "")
            + (f" (exit {v['exit']})" if v.get("exit") and not v.get("error") else "")
            for name, v in ops.items()
            if isinstance(v, dict) and "seconds" in v
        ]
        failed = "error" in ops or any(isinstance(v, dict) and v.get("error") for v in ops.values())
        text = ops.get("error") or "; ".join(parts)
        rows.append(("scale: operator reads", str(text), "", "MISSED" if failed else "ok"))
    h = r.get("herd")
    if h:
        if "error" in h:
            rows.append(("scale: herd after the plan", f"error: {h['error']}", "", "MISSED"))
        else:
            after = h["all_terminal_after_due_s"]
            ok = h["lost"] == 0 and h["terminal"] and after is not None and after <= 120
            rows.append(
                (
                    "scale: herd after the plan",
                    f"{h['n']} due at one instant: p50 {h['late_ms_p50']} ms, p95 "
                    f"{h['late_ms_p95']} ms; lost {h['lost']}, dup {h['duplicates']}; all "
                    + (f"terminal {after} s after due" if after is not None else "NOT terminal")
                    + " (waited up to 5 min); consumer peak RSS "
                    f"{h['consumer_peak_rss_mb']} MB"
                    + (
                        f"; the database's own outcome writes for the herd: "
                        f"{h['outcome_floor']['herd_seconds']} s (from "
                        f"{h['outcome_floor']['messages']} timed)"
                        if h.get("outcome_floor", {}).get("herd_seconds")
                        else ""
                    ),
                    "",
                    "terminal within 2 min: " + ("ok" if ok else "MISSED"),
                )
            )
    return rows
