"""Scenario ``api``: the HTTP API (``tzpush api``, a subprocess on the bench stack).

(a) Onboarding: N users, each with one device and two reminders, through ``POST /v1/batch`` in
batches of 1,000 items, one client, after a planning pass (as a running creator would have made):
each user's messages for the planned window are written at once too. The floor is the database's
own time for the same writes: every document the batch left in the database (users, tokens,
reminders, the messages planned at once, the change log...) copied and inserted directly
(``insert_many``, 1,000 at a time) into a fresh database with the same indexes, on the same
server. Bar: onboarding <= 1.5 x floor.

(b) Logins: ``PUT /v1/users/{u}/devices/{d}`` (a new device and token for an onboarded user),
20 concurrent clients (threads, each with its own keep-alive connection: ``http.client``), latency
as each client saw it. Bar: p95 < 100 ms.
"""

from __future__ import annotations

import http.client
import json
import resource
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from api.app import ensure_api_indexes
from api.keys import hash_key, new_key
from bench.scenarios_herd import pct
from bench.stack import TZPUSH, BenchStack, Proc, cpu_seconds, free_port
from shared.store import db as dbm

Doc = dict[str, Any]
BATCH = 1000
CLIENTS = 20
ZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo", "Asia/Kathmandu", "Australia/Sydney")
PLAN = (("meal", "lunch", "12:30"), ("medication", "pill", "08:15"))
RATIO_BAR = 1.5
P95_BAR_MS = 100.0


def user_id(i: int) -> str:
    return f"api-u{i:06d}"


def onboarding_items(n: int) -> list[Doc]:
    """Per user: the user, one device, two reminders (4 items), in order."""
    items: list[Doc] = []
    for i in range(n):
        uid = user_id(i)
        items.append({"op": "user", "userId": uid, "user": {"timezone": ZONES[i % len(ZONES)]}})
        items.append(
            {
                "op": "device",
                "userId": uid,
                "deviceId": f"phone-{i}",
                "device": {"token": f"ExponentPushToken[api-{i:06d}]"},
            }
        )
        for k, (category, label, at) in enumerate(PLAN):
            items.append(
                {
                    "op": "reminder",
                    "userId": uid,
                    "reminderId": f"{uid}-r{k}",
                    "reminder": {"category": category, "label": label, "at": at},
                }
            )
    return items


def start_api(st: BenchStack, key: str) -> tuple[Proc, str]:
    settings = st.settings_for("api")
    port = free_port()
    keys = json.dumps([{"name": "bench", "scope": "app", "sha256": hash_key(key)}])
    # The per-key request limit (200/s by default) is not what is measured here.
    env = st.env(
        settings,
        TZPUSH_API__KEYS=keys,
        TZPUSH_API__PORT=str(port),
        TZPUSH_API__RATE_PER_SECOND="100000",
        TZPUSH_API__BURST="100000",
    )
    proc = Proc("api", [str(TZPUSH), "api"], env, st.log_dir / "api.log")
    st.procs.append(proc)
    proc.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        if not proc.alive():
            raise RuntimeError(f"tzpush api exited: {proc.log_lines()[-5:]}")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"tzpush api not ready: {proc.log_lines()[-5:]}")


def onboard(client: httpx.Client, items: list[Doc]) -> Doc:
    t0 = time.perf_counter()
    failed = 0
    per_batch = []
    for start in range(0, len(items), BATCH):
        t = time.perf_counter()
        answer = client.post("/v1/batch", json={"items": items[start : start + BATCH]})
        answer.raise_for_status()
        failed += answer.json()["failed"]
        per_batch.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    return {
        "seconds": round(wall, 2),
        "items": len(items),
        "items_per_s": round(len(items) / wall, 1),
        "batches": len(per_batch),
        "batch_seconds_max": round(max(per_batch), 2),
        "failed_items": failed,
    }


def floor(st: BenchStack, source: str) -> Doc:
    """The same documents inserted directly into a fresh database with the same indexes."""
    src = st.client[source]
    target = st.client[f"{source}_floor"]
    dbm.ensure_indexes(target)
    ensure_api_indexes(target)
    docs: dict[str, list[Doc]] = {}
    for name in sorted(src.list_collection_names()):
        if name.startswith("system."):
            continue
        # What ensuring the indexes wrote itself (the planner's bookkeeping) is not onboarding.
        there = set(target[name].distinct("_id"))
        docs[name] = [d for d in src[name].find() if d["_id"] not in there]
    t0 = time.perf_counter()
    for name, rows in docs.items():
        for start in range(0, len(rows), BATCH):
            target[name].insert_many(rows[start : start + BATCH], ordered=False)
    wall = time.perf_counter() - t0
    return {
        "seconds": round(wall, 2),
        "documents": {name: len(rows) for name, rows in docs.items() if rows},
    }


def logins(url: str, key: str, n_users: int, total: int) -> Doc:
    """``total`` logins spread over CLIENTS threads; each a new device of an onboarded user.

    Each client is the standard library's ``http.client`` on its own keep-alive connection: the
    20 clients share the machine's two cores with the API and the database, and a client that
    spends less of them measures the API more than itself (httpx cost about 1.9 ms of CPU per
    request here, the standard library 0.26 ms: docs/performance.md)."""
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)
    where = urlsplit(url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def client_loop(c: int) -> None:
        mine: list[float] = []
        bad: list[int] = []
        conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=30)
        try:
            conn.request("GET", "/healthz")  # the connection is open before the clock starts
            conn.getresponse().read()
            start.wait()
            for j in range(c, total, CLIENTS):
                i = j % n_users
                path = f"/v1/users/{user_id(i)}/devices/login-{j}"
                body = json.dumps({"token": f"ExponentPushToken[login-{j:07d}]"})
                t = time.perf_counter()
                conn.request("PUT", path, body=body, headers=headers)
                answer = conn.getresponse()
                answer.read()
                mine.append((time.perf_counter() - t) * 1000)
                if answer.status != 200:
                    bad.append(answer.status)
        finally:
            conn.close()
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(CLIENTS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 1)

    return {
        "clients": CLIENTS,
        "logins": len(latencies),
        "errors": len(errors),
        "per_s": round(len(latencies) / wall, 1),
        "ms_p50": r(pct(latencies, 50)),
        "ms_p95": r(pct(latencies, 95)),
        "ms_max": r(max(latencies) if latencies else None),
    }


def plan_window(st: BenchStack) -> None:
    """A planning pass over the empty database, as a running creator would have made: with a
    planned window, each change is planned at once (the messages are part of the work)."""
    settings = st.settings_for("api")
    argv = [str(TZPUSH), "creator", "--once"]
    creator = Proc("api-creator", argv, st.env(settings), st.log_dir / "api-creator.log")
    creator.start()
    assert creator.popen is not None
    if creator.popen.wait(300) != 0:
        raise RuntimeError(f"creator --once failed: {creator.log_lines()[-5:]}")


def cpu_by_process(st: BenchStack, api: Proc) -> dict[str, float]:
    """CPU seconds so far of the bench itself, the API, the database and the broker."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out = {"bench_clients": usage.ru_utime + usage.ru_stime, "api": api.cpu()}
    for name in ("mongo", "activemq"):
        pid = st.local.pid(name)
        out[name] = cpu_seconds(pid) if pid else 0.0
    return out


def run_api(st: BenchStack, n: int, total_logins: int) -> Doc:
    key = new_key()
    plan_window(st)
    proc, url = start_api(st, key)
    try:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
            client.get("/healthz")
            onboarding = onboard(client, onboarding_items(n))
        cpu = proc.cpu()
        base = floor(st, st.dbname)  # before the logins add their own documents
        before = cpu_by_process(st, proc)
        login = logins(url, key, n, total_logins)
        after = cpu_by_process(st, proc)
        # Where the two cores went during the logins: the bench's 20 client threads, the API,
        # the database server and the broker (wake-ups of each login's new messages).
        login["cpu_s"] = {k: round(after[k] - before[k], 2) for k in after}
    finally:
        proc.stop()
    ratio = onboarding["seconds"] / base["seconds"] if base["seconds"] else None
    return {
        "users": n,
        "onboarding": onboarding,
        "floor": base,
        "ratio_to_floor": None if ratio is None else round(ratio, 2),
        "onboarding_bar_ok": ratio is not None and ratio <= RATIO_BAR,
        "login": login,
        "login_bar_ok": login["errors"] == 0 and (login["ms_p95"] or 1e9) < P95_BAR_MS,
        "api_cpu_s_onboarding": round(cpu, 2),
    }
