"""``shared.metrics.ScrapeProbes``: the gauges read at each scrape, and a probe that raises
leaves its gauge out of that scrape without failing it."""

from __future__ import annotations

from shared.metrics import ScrapeProbes


def samples(probes: ScrapeProbes) -> dict[tuple[str, tuple[str, ...]], float]:
    return {
        (s.name, tuple(s.labels.values())): s.value for m in probes.collect() for s in m.samples
    }


def test_probes_export_reachability_live_consumers_and_grace_at_each_scrape() -> None:
    probes = ScrapeProbes()
    assert samples(probes) == {}
    state = {"database": None, "broker": "not connected"}
    probes.health = lambda: dict(state)
    probes.consumers = lambda: {"meal": 2, "safety": 0}
    probes.grace = {"meal": 900}
    assert samples(probes) == {
        ("tzpush_dependency_up", ("broker",)): 0.0,
        ("tzpush_dependency_up", ("database",)): 1.0,
        ("tzpush_category_live_consumers", ("meal",)): 2.0,
        ("tzpush_category_live_consumers", ("safety",)): 0.0,
        ("tzpush_category_grace_seconds", ("meal",)): 900.0,
    }
    state["broker"] = None
    assert samples(probes)[("tzpush_dependency_up", ("broker",))] == 1.0


def test_a_probe_that_raises_is_left_out_of_the_scrape() -> None:
    probes = ScrapeProbes()

    def broken() -> dict[str, int]:
        raise RuntimeError("database away")

    probes.health = lambda: {"database": None}
    probes.consumers = broken
    assert samples(probes) == {("tzpush_dependency_up", ("database",)): 1.0}
