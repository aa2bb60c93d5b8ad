"""What the management state machine runs on: a backend (the memory twin or a MongoDB
database), the settings the oracle reads, a fake clock, a stub broker, and the answers of the
management calls named as the oracle names them."""

from __future__ import annotations

import copy
import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from creator.writers.base import Done
from shared.errors import ConflictError, InputError, NotFoundError
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.memory import Tables, memory_creator_stores
from shared.wire import decode
from tests.unit import management_model as mm
from tests.unit.management_check import Doc, Raw

# The planning settings the oracle reads: a slice 30 s short of 6 h, so that two passes whole
# minutes apart (the clock moves by whole minutes, plus 1 ms a reading) are never on its edge.
HORIZON = dt.timedelta(hours=24)
SLICE = dt.timedelta(hours=6) - dt.timedelta(seconds=30)


@dataclass
class Backend:
    """What the writers and the planner are built on, how to empty it, and a raw read of its
    tables for the check: ``raw(table)``, table one of users, tokens, reminders, messages and
    changes (the intent-change log)."""

    where: Any
    reset: Callable[[], None]
    raw: Raw
    # Told the machine's clock: the twin's database server keeps that time (MongoDB's own).
    use_clock: Callable[[Callable[[], dt.datetime]], None] = lambda clock: None


def memory_backend() -> Backend:
    """The in-memory twin (``memory_creator_stores``)."""
    tables = Tables()

    def reset() -> None:
        with tables.lock:
            for f in fields(tables):
                rows = getattr(tables, f.name)
                if isinstance(rows, dict):
                    rows.clear()

    def raw(table: str) -> list[Doc]:
        with tables.lock:
            return copy.deepcopy(list(getattr(tables, table).values()))

    def use_clock(clock: Callable[[], dt.datetime]) -> None:
        tables.server_clock = clock

    return Backend(memory_creator_stores(tables), reset, raw, use_clock)


def mongo_backend(database: Any) -> Backend:
    """A MongoDB database (its indexes made once; every collection emptied between examples)."""
    dbm.ensure_indexes(database)
    names = {
        "users": dbm.USERS,
        "tokens": dbm.TOKENS,
        "reminders": dbm.REMINDERS,
        "messages": dbm.MESSAGES,
        "changes": dbm.CHANGES,
    }

    def reset() -> None:
        for name in database.list_collection_names():
            database[name].delete_many({})

    def raw(table: str) -> list[Doc]:
        return list(database[names[table]].find({}))

    return Backend(database, reset, raw)


def machine_settings() -> Settings:
    """The defaults, with the horizon and slice above and two partitions."""
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    creator = settings.creator.model_copy(
        update={
            "horizon_hours": HORIZON.total_seconds() / 3600,
            "slice_hours": SLICE.total_seconds() / 3600,
            "partitions": 2,
        }
    )
    return settings.model_copy(update={"creator": creator})


class TickingClock:
    """The fake clock: each reading is 1 ms after the one before (so the instants the product
    stamps are ordered as its steps were); ``at`` is the next reading, moved on by the test."""

    def __init__(self, start: dt.datetime) -> None:
        self.at = start
        self.lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self.lock:
            now = self.at
            self.at += dt.timedelta(milliseconds=1)
            return now


class StubBroker:
    """Takes wake-ups as the broker would, and keeps the ids of the messages they name."""

    connected = True

    def __init__(self) -> None:
        self.armed: set[str] = set()

    def connect(self) -> StubBroker:
        return self

    def send(self, destination: str, body: bytes, **_: Any) -> None:
        self.armed.update(item.id for item in decode(body).items)

    def flush(self, timeout: float = 60.0) -> None:
        return None


def outcome(call: Callable[[], Any], *, reminder: bool = False) -> str:
    """What a call answered, as the model names it (``management_model``): a reminder's
    ``Done.change``, "ok" for any other success, or the refusal's status."""
    try:
        result = call()
    except NotFoundError:
        return mm.NOT_FOUND
    except ConflictError:
        return mm.CONFLICT
    except InputError:
        return mm.INVALID
    return str(result.change) if reminder and isinstance(result, Done) else mm.OK


def raised(o: Any) -> Any:
    """A batch item's outcome as a call would give it: returned, or raised if an error."""
    if isinstance(o, Exception):
        raise o
    return o
