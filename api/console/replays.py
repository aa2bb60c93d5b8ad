"""Replays started from the console: ``ops.replay`` (the code of ``tzpush replay`` and
``POST /v1/replays``), queued to the consumers before the answer; the watch page follows the
messages until they end.

A replay is chosen in two steps: a dry run counts what the selection takes now (``select``,
changing nothing), then the operator confirms and the replay is taken under a run id made here,
so the page can follow it. The rules are the replay's own: each message is taken with a
compare-and-set (never sent twice, whoever else replays) and recorded on the message with who
replayed it (``console:<key name>``) and why, then queued to the consumers (``ops.replay.queue``),
which judge it at their instant and send it with their Expo token at the fleet's rate. This
process never sends. What a consumer that dies leaves is settled by the next replay or the
janitor once its lease runs out.

What this process started is kept in memory (``Runs``) for the watch page; the messages carry
the run id too (``replay.run``), so a page served by another process, or after a restart, still
finds them.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

from pymongo.database import Database

from api.deps import Backend
from ops.replay import Selection, queue, resume, select
from shared.domain.messages import Doc, Status
from shared.store import replays as stored
from shared.store.mongo.figures import run_messages

log = logging.getLogger(__name__)

KEPT_RUNS = 50
SHOWN = 200


@dataclass
class Run:
    """A replay this process started."""

    run_id: str
    by: str
    reason: str
    ids: list[str]
    started: dt.datetime
    counts: Counter[str] = field(default_factory=Counter)
    done: bool = False
    error: str | None = None
    finished: dt.datetime | None = None


def selection_now(database: Database[Doc], selection: Selection, by: str) -> list[Doc]:
    """What a replay of ``selection`` takes now. Replays that stopped without settling (their
    lease ran out) are settled first, as every replay does, so what they never sent counts.
    Changes nothing else: this is also the dry run."""
    resume(database, by)
    return select(database, selection)


class Runs:
    """Starts replays and remembers the last ``KEPT_RUNS`` of them."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend  # its database is read when a replay starts, not before
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str) -> Run | None:
        with self._lock:
            return self._runs.get(run_id)

    def start(self, selection: Selection, docs: list[Doc], by: str, reason: str) -> Run:
        """Take ``docs`` (``selection_now``'s answer) and queue them to the consumers; returns
        once the broker has them (or the replay stopped: ``error``), the run, to watch."""
        run = Run(
            run_id=stored.new_run(by),
            by=by,
            reason=reason,
            ids=[str(d["_id"]) for d in docs],
            started=dt.datetime.now(dt.UTC),
        )
        with self._lock:
            self._runs[run.run_id] = run
            for old in list(self._runs)[:-KEPT_RUNS]:
                del self._runs[old]
        log.info("console replay %s by %s: %d message(s)", run.run_id, by, len(docs))
        self._run(run, selection, docs)
        return run

    def _run(self, run: Run, selection: Selection, docs: list[Doc]) -> None:
        try:
            if docs:
                b = self.backend
                run.counts.update(
                    queue(
                        b.db,
                        b.settings,
                        b.manager.planner.wakeups,
                        docs,
                        by=run.by,
                        reason=run.reason,
                        selection=selection,
                        run_id=run.run_id,
                    )
                )
        except Exception as exc:  # said on the watch page and logged; the replay settled itself
            log.exception("console replay %s stopped", run.run_id)
            run.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            run.finished = dt.datetime.now(dt.UTC)
            run.done = True


@dataclass
class Progress:
    """Where the messages of a run stand now, read from the database."""

    by_status: dict[str, int]
    messages: list[Doc]
    total: int

    @property
    def in_flight(self) -> int:
        return self.by_status.get(Status.REPLAYING.value, 0)


def progress(database: Database[Doc], run_id: str, run: Run | None) -> Progress:
    """The messages of ``run_id``: by their ids when this process started it, else by the run
    id they carry (a scan: no index serves ``replay.run``; replays are rare)."""
    docs = run_messages(database, run_id, run.ids if run is not None else None)
    by_status = Counter(str(d.get("status")) for d in docs)
    return Progress(
        by_status=dict(sorted(by_status.items())), messages=docs[:SHOWN], total=len(docs)
    )
