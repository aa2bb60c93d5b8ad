"""Issue 34: broker failover drills on an active/standby pair (two ActiveMQ brokers sharing one
store, as Amazon MQ's active/standby). Each reports sent, lost, duplicates and terminal like the
other drills, plus the seconds from each kill to the standby answering, to the consumer's
"broker failover" log line, and to the first push sent after it (through the new active).

- ``failover_scheduled``: a herd armed 1-2 minutes ahead (``AHEAD_S``); kill -9 of the active
  broker right after arming, the old one back as the new standby, kill -9 of the new active:
  the wake-ups fire from the shared store after two failovers.
- ``failover_herd``: kill -9 of the active broker while the herd is being sent: what was not
  acked is redelivered by the new active broker and sent once (the send guard).

The pair is the drill's own (``STATE_DIR/pair``, ports ``PAIR_PORT`` and ``PAIR_PORT + 1``);
the database and the fake are the bench's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

from bench.scenarios_herd import arm_herd, deliveries, wait_delivered, wait_terminal
from bench.stack import SECANTUS_VENV, STATE_DIR, BenchStack, Proc
from devstack.config import StackConfig
from devstack.stack import LocalStack

Doc = dict[str, Any]
PAIR_PORT = int(os.environ.get("TZPUSH_BENCH_PAIR_PORT", "46653"))
AHEAD_S = float(os.environ.get("TZPUSH_BENCH_FAILOVER_AHEAD_S", "75"))
TAKEOVER_S = 90.0


@contextlib.contextmanager
def broker_pair(st: BenchStack) -> Iterator[tuple[LocalStack, str]]:
    """A fresh pair (first broker active, second standby); (its LocalStack, its endpoints)."""
    endpoints = f"127.0.0.1:{PAIR_PORT},127.0.0.1:{PAIR_PORT + 1}"
    state = STATE_DIR / "pair"
    shutil.rmtree(state, ignore_errors=True)
    settings = st.settings.model_copy(
        update={
            "stomp": st.settings.stomp.model_copy(update={"endpoints": endpoints}),
            "local": st.settings.local.model_copy(update={"state_dir": str(state)}),
        }
    )
    config = StackConfig.from_settings(settings, venv_dir=SECANTUS_VENV)
    local = LocalStack(config, die_with_parent=True)
    try:
        local.up(config.brokers)
        yield local, endpoints
    finally:
        for name in reversed(config.brokers):
            local.stop(name)


def _kill_active(pair: LocalStack, consumer: Proc) -> Doc:
    """kill -9 of the broker answering now; waits for the other one to answer and for the
    consumer to say it failed over to it."""
    active = pair.active()
    if active is None:
        raise RuntimeError("no broker of the pair answers")
    other = next(b for b in pair.config.brokers if b != active)
    lines = len(consumer.log_lines())
    at = time.time()
    pair.kill9(active)
    while pair.active() != other:
        if time.time() - at > TAKEOVER_S:
            raise RuntimeError(f"{other} did not take over within {TAKEOVER_S:.0f} s")
        time.sleep(0.05)
    standby_s = round(time.time() - at, 2)
    back = consumer.wait_log("broker failover", TAKEOVER_S, after=lines)
    return {
        "killed": active,
        "at": at,
        "standby_active_s": standby_s,
        "back": back,
        "consumer_back_s": round(back - at, 2),
    }


def _first_send_after(st: BenchStack, ids: set[str], at: float) -> float | None:
    sends = [
        p["received_at_ms"] / 1000
        for p in st.fake.pushes()
        if (p.get("data") or {}).get("messageId") in ids and p["received_at_ms"] / 1000 >= at
    ]
    return round(min(sends) - at, 2) if sends else None


def _drill(st: BenchStack, n: int, seed: int, prefix: str, lead: float, action: Any) -> Doc:
    with broker_pair(st) as (pair, endpoints):
        settings = st.settings_for(prefix, lead=lead)
        settings = settings.model_copy(
            update={"stomp": settings.stomp.model_copy(update={"endpoints": endpoints})}
        )
        consumer = st.consumer(settings, f"{prefix}-consumer", TZPUSH_STOMP__ENDPOINTS=endpoints)
        try:
            consumer.wait_log("consuming", 60)
            kills, docs, due, timing = action(pair, settings, consumer)
            ids = {d["_id"] for d in docs}
            wait_delivered(st, n, max(30.0, due.timestamp() + 90 - time.time()))
            final = wait_terminal(st, sorted(ids), 90)
        finally:
            consumer.stop()
        out = deliveries(st, ids, due)
        out.pop("lateness_ms")
        out.update(statuses=final, terminal=final.get("pending", 0) == 0, **timing)
        for i, k in enumerate(kills, 1):
            out[f"kill{i}_broker"] = k["killed"]
            out[f"kill{i}_standby_active_s"] = k["standby_active_s"]
            out[f"kill{i}_consumer_back_s"] = k["consumer_back_s"]
        # The first push that went out after the consumer was connected to the new active one.
        first = _first_send_after(st, ids, kills[-1]["back"])
        out["kill_to_first_send_s"] = (
            None if first is None else round(first + kills[-1]["consumer_back_s"], 2)
        )
        out["failovers"] = len(kills)
        return out


def failover_scheduled(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """Wake-ups AHEAD_S ahead; two failovers before they fire."""

    st.fake.reset()

    def act(
        pair: LocalStack, settings: Any, consumer: Proc
    ) -> tuple[list[Doc], list[Doc], dt.datetime, Doc]:
        docs, due, timing = arm_herd(st, settings, n, seed, "fsched", margin_s=AHEAD_S)
        first = _kill_active(pair, consumer)
        pair.start(first["killed"])  # the old active comes back as the new standby
        second = _kill_active(pair, consumer)
        timing["due_after_second_kill_s"] = round(due.timestamp() - time.time(), 1)
        return [first, second], docs, due, timing

    return _drill(st, n, seed, "fsched", lead, act)


def failover_herd(st: BenchStack, n: int, seed: int, lead: float = 10.0) -> Doc:
    """kill -9 of the active broker while the herd is being sent (due + 0.2 s, Expo answering
    in 100 ms): sent and acked, sent and not acked, held and not sent, all at once."""
    st.fake.reset(latency_ms=100)

    def act(
        pair: LocalStack, settings: Any, consumer: Proc
    ) -> tuple[list[Doc], list[Doc], dt.datetime, Doc]:
        docs, due, timing = arm_herd(st, settings, n, seed, "fherd")
        time.sleep(max(0.0, due.timestamp() + 0.2 - time.time()))
        timing["pushed_before_kill"] = st.fake.stats()["pushes_accepted"]
        return [_kill_active(pair, consumer)], docs, due, timing

    try:
        return _drill(st, n, seed, "fherd", lead, act)
    finally:
        st.fake.reset()


DRILLS = {"failover_scheduled": failover_scheduled, "failover_herd": failover_herd}
