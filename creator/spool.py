"""The arming spool: what a planning pass inserted, on local disk, merged back in due order.

A pass plans a chunk of users at a time, so its memory does not grow with the number of
reminders; but each chunk spans the whole window, and arming chunk by chunk would cut every
wake-up into one per chunk (at 1M reminders in chunks of 20k: about 50 times the wake-ups).
Reading the inserted messages back from the database in due order (what a re-arm does) keeps
wake-ups full but costs a fifth of the insert time again on SecantusDB (measured: 5.6 s to read
back 100k messages inserted in 24.6 s). So each inserted chunk's wake-up items are written to a
temporary file as a sorted run (JSON lines, in (category, due instant, id) order) while the next
chunk is inserted, and once every chunk is in the database the runs are merged
(``heapq.merge``, one line per run in memory) into ``group_sorted``: the same full wake-ups as
grouping the whole window at once, in memory bounded by the number of runs.

A crash loses the files and nothing else: the window is marked in progress before the first
insert, and the next pass re-arms it from the database.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from shared.domain.plan import to_item
from shared.wire import Item

_FIELDS = tuple(Item.__dataclass_fields__)


class ArmSpool:
    """Sorted runs of wake-up items in a temporary directory (removed by ``close``)."""

    def __init__(self, directory: str | None = None) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="tzpush-arm-", dir=directory)
        self._runs: list[Path] = []
        self.count = 0
        self.bytes = 0

    def add(self, docs: Iterable[Mapping[str, Any]]) -> int:
        """Write one sorted run of these (inserted) messages; return how many."""
        rows = []
        for d in docs:
            item = to_item(d)
            snapshot = d.get("plannedAt")
            planned = (
                int(snapshot.timestamp() * 1000) if isinstance(snapshot, dt.datetime) else None
            )
            rows.append((d["category"], item.due_ms, item.id, planned, item))
        if not rows:
            return 0
        rows.sort(key=lambda r: (r[0], r[1], r[2]))
        path = Path(self._dir.name) / f"run-{len(self._runs):05d}.jsonl"
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        with open(path, "w", encoding="utf-8") as f:
            for cat, _, _, planned, item in rows:
                f.write(dumps([cat, planned, *(getattr(item, n) for n in _FIELDS)]))
                f.write("\n")
        self._runs.append(path)
        self.count += len(rows)
        self.bytes += os.path.getsize(path)
        return len(rows)

    def rows(self) -> Iterator[tuple[str, Item, int | None]]:
        """Every item, in (category, due instant, id) order, for ``group_sorted``."""
        merged = heapq.merge(*(_read(p) for p in self._runs), key=_key)
        for cat, planned, *values in merged:
            yield cat, Item(*values), planned

    def close(self) -> None:
        self._dir.cleanup()

    def __enter__(self) -> ArmSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _key(row: list[Any]) -> tuple[str, int, str]:
    # [category, planned_ms, id, due_ms, ...]: the Item's fields start with id, due_ms.
    return row[0], row[3], row[2]


def _read(path: Path) -> Iterator[list[Any]]:
    loads = json.JSONDecoder().decode
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield loads(line)
