"""The chaos run's seeded parts: the same seed (or file) gives the same faults and requests."""

from __future__ import annotations

from pathlib import Path

from bench import chaos_faults, chaos_workload


def test_a_seed_gives_the_same_fault_schedule_and_its_file_replays_it(tmp_path: Path) -> None:
    faults = chaos_faults.schedule(3, 600)
    assert faults == chaos_faults.schedule(3, 600)
    assert faults != chaos_faults.schedule(4, 600)
    chaos_faults.write(faults, tmp_path / "schedule.json")
    assert chaos_faults.read(tmp_path / "schedule.json") == faults


def test_faults_never_overlap_on_one_target_and_all_end_before_the_drain() -> None:
    for seed in range(20):
        faults = chaos_faults.schedule(seed, 600)
        assert len(faults) > 10
        assert all(f.end <= 600 - chaos_faults.QUIET_END_S for f in faults)
        ends: dict[str, float] = {}
        for f in sorted(faults, key=lambda f: f.at):
            for part in f.target.split(">"):
                assert ends.get(part, 0) <= f.at, (seed, f)
                ends[part] = f.end


def test_a_seed_gives_the_same_requests_for_the_same_start() -> None:
    start = 1_800_000_000.0
    ops = chaos_workload.plan(5, start, 300, 60, 1.0)
    assert ops == chaos_workload.plan(5, start, 300, 60, 1.0)
    kinds = {(o.method, o.path.split("/")[-2] if o.path.count("/") > 3 else "user") for o in ops}
    assert {("POST", "user"), ("PATCH", "reminders"), ("DELETE", "devices")} <= kinds
    rems = [o.body for o in ops if o.method == "PUT" and "/reminders/" in o.path]
    assert len({r["data"]["rev"] for r in rems}) == len(rems)  # one rev per content
