"""The seeded fault schedule of a chaos run: what happens to which process, when, for how long.

Pure: ``schedule(seed, seconds)`` gives the same list for the same seed, and the list is written
to and read from a JSON file, so a run replays from its seed or from its file. At most one fault
holds a target at a time; every fault ends (process restarted or continued, link healed, Expo
fake back to normal) by ``seconds``, so the run drains on a whole system.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SERVICES = ("mongo", "activemq")
TZPUSH = ("creator-1", "creator-2", "consumer-1", "consumer-2", "receipts", "api")
PROCESS_KINDS = ("kill9", "term", "stop")
EXPO_KINDS = ("expo_429", "expo_5xx", "expo_hang", "expo_dnr", "expo_late_receipts")
QUIET_START_S = 15.0  # the workload's first users settle before the first fault
QUIET_END_S = 20.0  # every fault is over this long before the run's end


@dataclass(frozen=True)
class Fault:
    """``at`` seconds after the run's start, ``kind`` on ``target`` for ``duration`` seconds
    (for kill9 and term: the delay before the restart); ``detail`` says how much."""

    at: float
    kind: str
    target: str
    duration: float
    detail: dict[str, Any]

    @property
    def end(self) -> float:
        return self.at + self.duration


def _one(rng: random.Random, at: float) -> Fault:
    roll = rng.random()
    if roll < 0.45:
        target = rng.choice(SERVICES + TZPUSH)
        kind = rng.choice(PROCESS_KINDS)
        if kind == "stop":
            return Fault(at, kind, target, round(rng.uniform(0.5, 6.0), 2), {})
        return Fault(at, kind, target, round(rng.uniform(0.5, 12.0), 2), {})
    if roll < 0.55:
        target = rng.choice(TZPUSH[:4])
        offset = rng.choice((-1, 1)) * rng.randint(1, 5)
        return Fault(at, "clock", target, round(rng.uniform(15, 45), 1), {"offset_s": offset})
    if roll < 0.75:
        target = f"{rng.choice(TZPUSH)}>{rng.choice(SERVICES)}"
        if rng.random() < 0.5:
            delay = round(rng.uniform(0.05, 0.8), 3)
            return Fault(at, "net_delay", target, round(rng.uniform(3, 20), 1), {"delay_s": delay})
        return Fault(at, "net_cut", target, round(rng.uniform(1, 10), 1), {})
    kind = rng.choice(EXPO_KINDS)
    duration = round(rng.uniform(4, 20), 1)
    detail: dict[str, Any] = {
        "expo_429": {"rate_per_second": rng.choice((1, 3, 10))},
        "expo_5xx": {"error_rate": round(rng.uniform(0.2, 0.9), 2)},
        "expo_hang": {"hang_after_accept_s": round(rng.uniform(4, 8), 1)},
        "expo_dnr": {"install": rng.random()},  # which install, as a fraction of those known
        "expo_late_receipts": {"receipt_delay_s": rng.choice((20, 60, 120))},
    }[kind]
    return Fault(at, kind, "expo", duration, detail)


def schedule(seed: int, seconds: float, mean_gap_s: float = 12.0) -> list[Fault]:
    """Faults at random instants (mean ``mean_gap_s`` apart) over ``seconds``, seeded."""
    rng = random.Random(f"chaos-faults-{seed}")
    busy: dict[str, float] = {}
    out: list[Fault] = []
    at = QUIET_START_S
    while True:
        at += rng.expovariate(1 / mean_gap_s)
        fault = _one(rng, round(at, 2))
        if fault.end > seconds - QUIET_END_S:
            break
        parts = fault.target.split(">")
        if any(busy.get(p, 0) > fault.at for p in parts):
            continue
        for p in parts:
            busy[p] = fault.end + 2.0  # a restarted process gets a moment before the next
        out.append(fault)
    return out


def write(faults: list[Fault], path: Path) -> None:
    path.write_text(json.dumps([asdict(f) for f in faults], indent=1))


def read(path: Path) -> list[Fault]:
    return [Fault(**f) for f in json.loads(path.read_text())]
