"""Scenarios 2 (herd), 3 (outage) and 4 (limited herd): many messages due at one instant.

The consumer runs as a subprocess (``tzpush consumer``), the fake as another; lateness is what
the fake saw: ``received_at_ms - due``. Duplicates are pushes naming the same ``messageId``.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
import urllib.request
from typing import Any

from bench import workload
from bench.stack import BenchStack, Proc, free_port
from creator.janitor import sweep
from creator.planner import Planner
from shared.domain.outcomes import journal_row, row_entries
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.journal import apply_outcomes, entry_ops
from shared.store.mongo import creator_stores

Doc = dict[str, Any]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


def arm_herd(
    st: BenchStack, settings: Settings, n: int, seed: int, prefix: str, margin_s: float = 3.0
) -> tuple[list[Doc], dt.datetime, Doc]:
    """Seed n people, make their messages due far enough ahead, arm them; (docs, due, timing)."""
    t = time.perf_counter()
    people = workload.herd_people(st.db, n, seed, prefix)
    # Messages insert about half as fast as users+tokens+reminders (more indexes): measured here,
    # so the due instant leaves room on a loaded machine too.
    per_msg = (time.perf_counter() - t) / (3 * n) * 2
    lead = settings.wakeup.lead_seconds
    ahead = n * per_msg + n / 20000 + lead + margin_s
    due = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=ahead)).replace(microsecond=0)
    if due.second == 0:  # planned daily reminders fall on whole minutes: keep the herd apart
        due += dt.timedelta(seconds=1)
    t = time.perf_counter()
    docs = workload.herd_messages(st.db, people, due)
    insert_s = time.perf_counter() - t
    broker = st.broker(settings)
    try:
        t = time.perf_counter()
        wakeups = Planner(st.db, broker, settings).arm(docs)
        arm_s = time.perf_counter() - t
    finally:
        broker.close()
    slack = (due - dt.timedelta(seconds=lead) - dt.datetime.now(dt.UTC)).total_seconds()
    timing = {
        "insert_seconds": round(insert_s, 2),
        "arm_seconds": round(arm_s, 2),
        "wakeups": len(wakeups),
        "slack_before_wakeup_s": round(slack, 2),
    }
    return docs, due, timing


def deliveries(st: BenchStack, ids: set[str], due: dt.datetime) -> Doc:
    """What the fake received for these ids: sent, lost, duplicates, lateness."""
    due_ms = due.timestamp() * 1000
    first: dict[str, float] = {}
    dup = 0
    for p in st.fake.pushes():
        mid = (p.get("data") or {}).get("messageId")
        if mid not in ids:
            continue
        if mid in first:
            dup += 1
        else:
            first[mid] = p["received_at_ms"] - due_ms
    late = sorted(first.values())
    return {
        "n": len(ids),
        "sent": len(first),
        "lost": len(ids) - len(first),
        "duplicates": dup,
        "late_ms_p50": _r(statistics.median(late)) if late else None,
        "late_ms_p95": _r(pct(late, 95)),
        "late_ms_min": _r(late[0]) if late else None,
        "late_ms_max": _r(late[-1]) if late else None,
        "lateness_ms": [round(x) for x in late],
    }


def _after(out: Doc, due: dt.datetime, since: float, polled: float) -> float:
    """Seconds from ``since`` to the last push the fake received (else to when polling ended)."""
    last = polled if out["late_ms_max"] is None else due.timestamp() + out["late_ms_max"] / 1000
    return round(last - since, 2)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x)


def statuses(st: BenchStack, ids: list[str]) -> dict[str, int]:
    """Status counts of these messages: one pass over the scenario's own collection (each
    scenario has a database of its own), filtered here. An ``$in`` of the ids costs this server
    about a millisecond per id: 12 s for the 10k herd, polled every second, which kept the
    consumer's own writes of the herd's outcomes waiting past their socket timeout."""
    want = set(ids)
    out: dict[str, int] = {}
    for d in st.db[dbm.MESSAGES].find():
        if d["_id"] in want:
            out[d["status"]] = out.get(d["status"], 0) + 1
    return out


def wait_delivered(st: BenchStack, n: int, timeout: float, base: int = 0) -> float:
    """Poll the fake until ``n`` pushes beyond ``base`` were accepted; return when (time)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if st.fake.stats()["pushes_accepted"] - base >= n:
            return time.time()
        time.sleep(0.2)
    return time.time()


def any_pending_at(st: BenchStack, due: dt.datetime) -> bool:
    """Whether a message due at ``due`` is still pending: one range of the pending index (the
    janitor's shape). This server reads the whole range even for one document: 2.5 s for
    50,000 pending at one instant (measured), so it is asked once the consumer says it is done
    (``merged``), not every second."""
    flt = {"status": "pending", "isDeleted": False, "scheduledAt": {"$gte": due, "$lte": due}}
    return st.db[dbm.MESSAGES].find_one(flt, {"_id": 1}) is not None


def merged(metrics_url: str) -> float | None:
    """Messages whose outcome the consumer has written to the database: its
    ``tzpush_messages_total``, counted after each write of outcomes (consumer/recorder.py);
    None if its metrics do not answer."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tzpush_messages_total{")
    )


def wait_terminal(st: BenchStack, ids: list[str], timeout: float) -> dict[str, int]:
    deadline = time.time() + timeout
    while True:
        s = statuses(st, ids)
        if s.get("pending", 0) == 0 or time.time() > deadline:
            return s
        time.sleep(2.0)


def wait_none_pending_at(
    st: BenchStack, due: dt.datetime, timeout: float, metrics_url: str, n: int
) -> float | None:
    """Until no message due at ``due`` is pending: when (time), or None at ``timeout``.

    The consumer's count of written outcomes is polled every second (free); the database is
    asked once that count reaches ``n`` (or every 30 s while the metrics do not answer):
    polling the database itself every second was a load of its own (``any_pending_at``)."""
    deadline = time.time() + timeout
    asked = time.time()
    while True:
        count = merged(metrics_url)
        done = count is not None and count >= n
        if done or (count is None and time.time() - asked >= 30.0):
            at, asked = time.time(), time.time()
            if not any_pending_at(st, due):
                return at
            if done:
                time.sleep(9.0)
        if time.time() > deadline:
            return None
        time.sleep(1.0)


def watch_prep(st: BenchStack, n: int, due: dt.datetime, lead: float, base: int) -> Doc:
    """Time from the wake-ups' firing (due - lead) until every send guard is in (prep's core)."""
    fire = due.timestamp() - lead
    done = None
    while time.time() < due.timestamp() + 5:
        if st.db[dbm.SENDS].estimated_document_count() - base >= n:
            done = time.time()
            break
        time.sleep(0.25)
    return {"guards_in_after_fire_s": round(done - fire, 2) if done else None}


def outcome_floor(st: BenchStack, after: dt.datetime, sample: int) -> Doc:
    """The database's own time for the writes that make a herd's messages terminal: the
    consumer's very updates (``entry_ops``, ``apply_outcomes``: success, ticket, receipt due)
    applied to ``sample`` other pending messages (due from an hour after ``after``), timed
    apart from reading them; and that per-message cost times the herd."""
    flt = {
        "status": "pending",
        "isDeleted": False,
        "scheduledAt": {
            "$gte": after + dt.timedelta(hours=1),
            "$lt": after + dt.timedelta(hours=3),
        },
    }
    docs = list(st.db[dbm.MESSAGES].find(flt).limit(sample))
    now = dt.datetime.now(dt.UTC)
    rows = [
        journal_row(
            id=d["_id"],
            ok=True,
            ticket=f"floor-{i}",
            error=None,
            message=None,
            attempts=1,
            token=d.get("notificationTokenId"),
            user=d.get("userId"),
            cap=False,
            ld=d.get("localDate"),
            due=int(d["scheduledAt"].timestamp() * 1000),
            code=None,
        )
        for i, d in enumerate(docs)
    ]
    updates, effects, refunds = entry_ops(row_entries(rows, now, "bench-floor"), 900.0)
    t = time.perf_counter()
    apply_outcomes(st.db, updates, effects, refunds, 3, now)
    took = time.perf_counter() - t
    return {"messages": len(docs), "seconds": round(took, 2)}


def run_herd(
    st: BenchStack,
    n: int,
    seed: int,
    prefix: str = "herd",
    *,
    fake_rate: float = 0,
    client_rate: float = 100000.0,
    lead: float = 15.0,
    terminal_wait: float = 60.0,
    floor_sample: int = 0,
) -> Doc:
    """``n`` messages due at one instant; ``terminal_wait``: how long after the last push the
    bench waits for every one of them to be terminal in the database (at least that long
    after due)."""
    st.fake.reset(rate_per_second=fake_rate)
    settings = st.settings_for(prefix, lead=lead, rate=client_rate)
    port = free_port()
    consumer = st.consumer(settings, f"{prefix}-consumer", TZPUSH_METRICS__PORT=str(port))
    try:
        consumer.wait_log("consuming", 60)
        base = st.db[dbm.SENDS].estimated_document_count()
        docs, due, timing = arm_herd(st, settings, n, seed, prefix)
        prep = watch_prep(st, n, due, lead, base)
        limit = n / (fake_rate or 2000) + 60
        last = wait_delivered(st, n, due.timestamp() + limit - time.time())
        ids = [d["_id"] for d in docs]
        terminal_at = wait_none_pending_at(
            st,
            due,
            max(due.timestamp() + terminal_wait, last + terminal_wait) - time.time(),
            f"http://127.0.0.1:{port}/metrics",
            n,
        )
        final = statuses(st, ids)
        cpu = consumer.cpu()
        peak_mb = consumer.peak_rss_mb()
    finally:
        consumer.stop()
    floor: Doc = {}
    if floor_sample:
        try:
            floor = outcome_floor(st, due, floor_sample)
        except Exception as exc:  # keep the herd's own figures
            floor = {"error": f"{type(exc).__name__}: {exc}"}
        if floor.get("messages"):
            floor["herd_seconds"] = round(floor["seconds"] / floor["messages"] * n, 1)
    out = deliveries(st, set(ids), due)
    stats = st.fake.stats()
    out.update(
        **timing,
        **prep,
        lead_s=lead,
        client_rate=client_rate,
        fake_rate=fake_rate,
        all_delivered_after_due_s=round(last - due.timestamp(), 2),
        http_429=stats.get("http_429", 0),
        statuses=final,
        terminal=final.get("pending", 0) == 0,
        all_terminal_after_due_s=(
            None if terminal_at is None else round(terminal_at - due.timestamp(), 2)
        ),
        consumer_cpu_s=round(cpu, 2),
        consumer_peak_rss_mb=peak_mb,
    )
    if floor:
        out["outcome_floor"] = floor
    return out


def run_outage(
    st: BenchStack,
    n: int,
    seed: int,
    outage_s: float = 30.0,
    prefix: str = "outage",
    lead: float = 10.0,
) -> Doc:
    """Consumer stopped 1 s before the due instant and started ``outage_s`` after it stopped."""
    st.fake.reset()
    settings = st.settings_for(prefix, lead=lead)
    # shutdown timeout 0: the consumer really leaves (with the default 25 s it would stay to send
    # what is due within 25 s, and there would be no outage to measure).
    extra = {"TZPUSH_SHUTDOWN__TIMEOUT_S": "0"}
    first = st.consumer(settings, f"{prefix}-consumer-1", **extra)
    second: Proc | None = None
    try:
        first.wait_log("consuming", 60)
        docs, due, timing = arm_herd(st, settings, n, seed, prefix)
        time.sleep(max(0.0, due.timestamp() - 1 - time.time()))
        stopped = time.time()
        first.stop()
        exited = time.time()
        time.sleep(max(0.0, stopped + outage_s - time.time()))
        second = st.consumer(settings, f"{prefix}-consumer-2", **extra)
        ready = second.wait_log("consuming", 60)
        last = wait_delivered(st, n, 120)
        ids = [d["_id"] for d in docs]
        final = wait_terminal(st, ids, 60)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    out = deliveries(st, set(ids), due)
    out.update(
        **timing,
        outage_s=outage_s,
        stopped_before_due_s=round(due.timestamp() - stopped, 2),
        exited_before_due_s=round(due.timestamp() - exited, 2),
        restart_after_due_s=round(second.started_at - due.timestamp(), 2),
        # From the fake's own receive times (the bench's polling of the fake would add up to
        # 0.2 s of its own): the last push received, measured from the restart and from ready.
        all_sent_after_restart_s=_after(out, due, second.started_at, last),
        all_sent_after_ready_s=_after(out, due, ready, last),
        statuses=final,
        terminal=final.get("pending", 0) == 0,
    )
    return out


def janitor_until_terminal(st: BenchStack, ids: list[str], settings: Settings) -> Doc:
    """Run the janitor now with no grace and no margin (the drill's messages are past due by
    the database's clock, which the janitor trusts over ours); statuses after."""
    cats = {c: cs.model_copy(update={"grace_seconds": 0}) for c, cs in settings.categories.items()}
    creator = settings.creator.model_copy(update={"janitor_margin_seconds": 0})
    impatient = settings.model_copy(update={"categories": cats, "creator": creator})
    ended = sweep(creator_stores(st.db).pending, impatient, dt.datetime.now(dt.UTC))
    return {"janitor_ended": ended, "statuses_after_janitor": statuses(st, ids)}
