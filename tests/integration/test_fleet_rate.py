"""Issue 15, "one Expo rate for the fleet": N consumers share Expo's rate (600/s here, the fake
set to refuse anything faster with a 429), however many of them run: each live sender takes its
share from the registry of live senders. Here two consumer processes send one herd together."""

from __future__ import annotations

import json

from shared.store.fleet import FleetShare
from tests.integration.consumer_support import (
    ConsumerProcess,
    arm,
    herd,
    in_seconds,
    ms,
    status_counts,
    terminal,
)
from tests.integration.harness import wait_for
from tests.integration.ops_helpers import run_cli

RATE = 600.0


def test_two_consumers_share_the_rate_and_earn_no_429(world, tmp_path):
    world.fake.configure(rate_per_second=RATE)
    expo = world.settings.expo.model_copy(update={"rate_per_second": RATE, "concurrency": 4})
    world.settings = world.settings.model_copy(update={"expo": expo})
    procs = [ConsumerProcess(world.settings, tmp_path / f"c{i}.log") for i in range(2)]
    try:
        for p in procs:
            p.wait_consuming()
        n = 1800
        due = in_seconds(8)
        docs = herd(world, n, due, prefix="fl")
        arm(world, docs)
        wait_for(lambda: terminal(world, n), 60, what="the herd to end")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(20)
            p.close()
    stats = world.fake.stats()
    assert stats["http_429"] == 0, f"{stats['http_429']} requests refused with 429"
    assert status_counts(world) == {"success": n}
    last = max(p["received_at_ms"] for p in world.fake.pushes())
    assert (last - ms(due)) / 1000 <= n / RATE + 2


def test_stats_name_the_categories_no_live_consumer_takes(world, capsys):
    share = FleetShare(world.db, "cons-x", RATE, kind="consumer", categories=["meal", "mood"])
    share.start()
    try:
        assert run_cli(world.settings, "stats", "--json") == 0
        senders = json.loads(capsys.readouterr().out)["senders"]
        others = [c for c in world.settings.categories if c not in ("meal", "mood")]
        assert senders["categories_without_consumer"] == others
        assert [(s["id"], s["kind"]) for s in senders["live"]] == [("cons-x", "consumer")]
    finally:
        share.stop()
    assert run_cli(world.settings, "stats", "--json") == 0
    senders = json.loads(capsys.readouterr().out)["senders"]
    assert senders["live"] == []
    assert senders["categories_without_consumer"] == list(world.settings.categories)


def test_a_share_follows_the_number_of_live_senders(world):
    a = FleetShare(world.db, "a", RATE).start()
    b = FleetShare(world.db, "b", RATE, kind="replay").start()
    try:
        wait_for(lambda: a.rate() == RATE / 2, 5, what="A to see B")
        assert b.rate() == RATE / 2
    finally:
        b.stop()
    wait_for(lambda: a.rate() == RATE, 5, what="A to see B leave")
    a.stop()
