"""Inserting planned messages: duplicates refused by the database, and told apart."""

from __future__ import annotations

import logging

from creator.context import PlanContext
from creator.report import PassReport
from shared.domain.messages import Doc

log = logging.getLogger("creator.planner")

INSERT_CHUNK = 5000  # messages per insert
# Above this many duplicates, none is looked up (as many ids as the MongoDB adapter looks up
# with $in before it scans instead, ``shared.store.mongo.plans.SCAN_THRESHOLD``).
LOOKUP_THRESHOLD = 300


class Inserter:
    """Inserts planned messages into the stores of a ``PlanContext``."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx

    def insert(
        self, docs: list[Doc], report: PassReport, fresh: set[str] | None = None
    ) -> list[Doc]:
        """Insert ``docs``, a duplicate refused; returns what should be armed: every document
        but those colliding with another pending message (same user, token, category, label
        and instant under another ``_id``: that one stands). Counts ``inserted``, ``existing``
        and ``conflicts`` in ``report``; ``fresh`` gets the ids this call inserted."""
        inserted, duplicates = self.ctx.stores.plans.insert_messages(docs, INSERT_CHUNK)
        report.inserted += inserted
        if fresh is not None:
            refused = {d["_id"] for d in duplicates}
            fresh.update(d["_id"] for d in docs if d["_id"] not in refused)
        if not duplicates:
            return docs
        # Servers differ in which index they report, so look at what exists.
        existing = self._same_occurrence(duplicates)
        conflicted = {d["_id"] for d in duplicates} - existing
        report.existing += len(duplicates) - len(conflicted)
        report.conflicts += len(conflicted)
        if conflicted:
            log.warning("%d planned messages collide with other pending ones", len(conflicted))
        return [d for d in docs if d["_id"] not in conflicted]

    def _same_occurrence(self, docs: list[Doc]) -> set[str]:
        """Which duplicates are this very occurrence (same ``_id``). Up to
        ``LOOKUP_THRESHOLD``: looked up; above (a pass planning again a window already
        planned), all of them. Arming a conflicting id sends nothing: the consumer finds no
        such message and dead-letters that id, the rest of its wake-up goes on."""
        ids = {d["_id"] for d in docs}
        if len(ids) > LOOKUP_THRESHOLD:
            return ids
        return self.ctx.stores.plans.existing_ids(ids)
