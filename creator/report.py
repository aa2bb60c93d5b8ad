"""What a planning did: ``PassReport``, its one-line summary, and the bad documents it skipped."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared import metrics
from shared.domain.plan import BadDocument

# One logger for the planner's pieces: their lines keep the name they always had.
log = logging.getLogger("creator.planner")

# Bad documents logged one by one per pass; the rest are counted in one line (and the metric).
LOG_BAD_DOCUMENTS = 100


@dataclass
class PassReport:
    """What a planning pass did (printed by ``tzpush creator --once``)."""

    window_start: dt.datetime | None = None
    window_end: dt.datetime | None = None
    reminders: int = 0
    planned: int = 0
    inserted: int = 0
    existing: int = 0
    conflicts: int = 0
    wakeups: int = 0
    missed: int = 0
    seconds: float = 0.0
    partitions: list[int] = field(default_factory=list)  # held by this creator during the pass
    planned_partitions: list[int] = field(default_factory=list)  # planned in this pass
    spooled_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: list[BadDocument] = field(default_factory=list)  # bad documents, each once
    # Users a planning of a few users looked up after its insert (``Repairs.drop_erased``):
    # found there (with the ``createdAt`` found: a user erased and created again is another),
    # or erased since it read them (``Manager.undo_if_erased``).
    alive: dict[str, Any] = field(default_factory=dict)
    erased: set[str] = field(default_factory=set)

    def summary(self) -> str:
        """One line: the partitions held and planned, the window, the counts, the seconds."""
        bad = (
            f"; {len(self.skipped)} bad documents skipped (logged; `tzpush doctor` lists them)"
            if self.skipped
            else ""
        )
        held = (
            f"partitions {ranges(self.partitions)} held" if self.partitions else "no partition held"
        )
        if self.window_start is None:
            return (
                f"nothing to plan (window already planned; {held}); {self.missed} marked is_missed"
            )
        return (
            f"{held}, {ranges(self.planned_partitions)} planned: "
            f"planned {self.window_start:%Y-%m-%d %H:%M:%S}Z .. "
            f"{self.window_end:%Y-%m-%d %H:%M:%S}Z: "
            f"{self.reminders} reminders -> {self.planned} occurrences x tokens, "
            f"{self.inserted} new, {self.existing} already there, {self.conflicts} conflicts; "
            f"{self.wakeups} wake-ups armed; "
            f"{self.missed} marked is_missed; {self.seconds:.2f} s{bad}"
        )

    def add_skipped(self, skipped: Iterable[BadDocument]) -> None:
        """Add bad documents a planning skipped: each once per report (a user with reminders in
        two categories is one bad user), the first ``LOG_BAD_DOCUMENTS`` with a log line each,
        every one counted in ``tzpush_bad_documents_total``."""
        seen = {(b.kind, b.id) for b in self.skipped}
        for bad in skipped:
            if (bad.kind, bad.id) in seen:
                continue
            seen.add((bad.kind, bad.id))
            self.skipped.append(bad)
            if len(self.skipped) <= LOG_BAD_DOCUMENTS:
                metrics.bad_document(log, "planner", bad)
            else:
                metrics.BAD_DOCUMENTS.labels("planner", bad.kind).inc()
                if len(self.skipped) == LOG_BAD_DOCUMENTS + 1:
                    log.warning(
                        "planner: more than %d bad documents in this pass; the rest are only "
                        "counted (tzpush_bad_documents_total) and listed by `tzpush doctor`",
                        LOG_BAD_DOCUMENTS,
                    )


def ranges(ps: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"`` (``"none"`` when empty)."""
    out: list[str] = []
    for p in sorted(ps):
        if out and out[-1].split("-")[-1] == str(p - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{p}"
        else:
            out.append(str(p))
    return ",".join(out) or "none"
