"""Scenario ``health``: the API's probes while its work is saturated (issue 32 item 1).

Users with R reminders each are onboarded through ``POST /v1/batch``; then C clients change the
time zone of every user at once (``PUT /v1/users/{id}``, one ordinary app key), while one client
asks ``GET /healthz`` every 50 ms and another ``GET /readyz`` every 250 ms. Reported: each
probe's latency p50/p99/max (bar: /healthz p99 < 100 ms, what a load balancer's 5 s check
needs with room), and the zone change's cost: each change's latency, and per reminder moved.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import httpx

from api.keys import new_key
from bench.scenarios_api import BATCH, start_api
from bench.scenarios_herd import pct
from bench.stack import BenchStack

Doc = dict[str, Any]
HEALTH_P99_BAR_MS = 100.0
ZONES = ("Europe/Berlin", "America/New_York")


def _items(users: int, reminders: int) -> list[Doc]:
    items: list[Doc] = []
    for u in range(users):
        uid = f"hz-u{u:04d}"
        items.append({"op": "user", "userId": uid, "user": {"timezone": ZONES[0]}})
        for r in range(reminders):
            at = f"{6 + r % 16:02d}:{(r * 7) % 60:02d}"
            body = {"category": "meal", "label": f"l{r}", "at": at}
            items.append(
                {"op": "reminder", "userId": uid, "reminderId": f"{uid}-r{r}", "reminder": body}
            )
    return items


def _probe(url: str, path: str, every_s: float, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=30) as c:
        while not stop.is_set():
            t0 = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                c.get(path)
            out.append((time.perf_counter() - t0) * 1000)
            stop.wait(every_s)


def _summary(ms: list[float]) -> Doc:
    return {
        "n": len(ms),
        "ms_p50": pct(ms, 50),
        "ms_p99": pct(ms, 99),
        "ms_max": round(max(ms), 1) if ms else None,
    }


def run_health(st: BenchStack, users: int, reminders: int, clients: int) -> Doc:
    key = new_key()
    proc, url = start_api(st, key)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
            items = _items(users, reminders)
            for i in range(0, len(items), BATCH):
                answer = client.post("/v1/batch", json={"items": items[i : i + BATCH]})
                answer.raise_for_status()
        stop = threading.Event()
        health: list[float] = []
        ready: list[float] = []
        probes = [
            threading.Thread(target=_probe, args=(url, "/healthz", 0.05, stop, health)),
            threading.Thread(target=_probe, args=(url, "/readyz", 0.25, stop, ready)),
        ]
        for t in probes:
            t.start()
        changes: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        def change(ids: list[str]) -> None:
            with httpx.Client(base_url=url, headers=headers, timeout=600) as c:
                for uid in ids:
                    t0 = time.perf_counter()
                    r = c.put(f"/v1/users/{uid}", json={"timezone": ZONES[1]})
                    with lock:
                        changes.append((time.perf_counter() - t0) * 1000)
                        if r.status_code != 200:
                            errors.append(f"{r.status_code} {r.text[:200]}")

        ids = [f"hz-u{u:04d}" for u in range(users)]
        workers = [threading.Thread(target=change, args=(ids[k::clients],)) for k in range(clients)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall_s = time.perf_counter() - t0
        stop.set()
        for t in probes:
            t.join()
    finally:
        proc.stop()
    per_change = _summary(changes)
    p99 = _summary(health)["ms_p99"]
    return {
        "users": users,
        "reminders_per_user": reminders,
        "clients": clients,
        "zone_changes": per_change,
        "zone_changes_s": round(wall_s, 2),
        "zone_change_ms_per_reminder": round((pct(changes, 50) or 0) / reminders, 2),
        "errors": errors[:5],
        "healthz": _summary(health),
        "readyz": _summary(ready),
        "health_bar_ok": not errors and p99 is not None and p99 < HEALTH_P99_BAR_MS,
    }
