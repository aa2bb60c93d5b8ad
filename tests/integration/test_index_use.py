"""The management paths an app backend drives (a login, onboarding) read through an index.

On SecantusDB a query no index serves reads the whole collection (about 20 ms per 1,000 tokens
measured); a login that scans the tokens gets slower with every user. So every read these paths
issue is captured (pymongo command monitoring) and checked against the indexes by the rule the
server follows (``_unserved``). Measured on SecantusDB 0.7: ``{isActive: true, userId: {$in}}``
scans (21 ms at 1,100 tokens) where ``{userId: {$in}, isActive: true}`` is served (0.9 ms), and a
partial index whose filter has a ``$type`` clause is never used (78 ms at 5,000 tokens).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pymongo import monitoring
from pymongo.database import Database

from shared.store import db as dbm

Doc = dict[str, Any]


class _Reads(monitoring.CommandListener):
    """The ``find`` commands sent while recording (collection and filter)."""

    def __init__(self) -> None:
        self.recording = False
        self.finds: list[tuple[str, Doc]] = []
        self.lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.recording and event.command_name == "find":
            with self.lock:
                self.finds.append((str(event.command["find"]), dict(event.command["filter"])))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


_READS = _Reads()
monitoring.register(_READS)


@pytest.fixture
def reads() -> Iterator[Callable[[Callable[[], Any]], list[tuple[str, Doc]]]]:
    def record(action: Callable[[], Any]) -> list[tuple[str, Doc]]:
        _READS.finds.clear()
        _READS.recording = True
        try:
            action()
        finally:
            _READS.recording = False
        return list(_READS.finds)

    yield record
    _READS.recording = False


def _unserved(db: Database[Doc], finds: list[tuple[str, Doc]]) -> list[str]:
    """The finds no index serves, by the rule this server follows (measured; its ``explain``
    claims a COLLSCAN for queries it serves from an index, so it cannot be the oracle): it picks
    the index whose first key is the filter's first field, and a partial index only when the
    filter names each field of the partial filter with the same value."""
    out = []
    for coll, flt in finds:
        if not flt or next(iter(flt)) == "_id":
            continue
        first = next(iter(flt))
        served = False
        for ix in db[coll].list_indexes():
            if next(iter(ix["key"])) != first:
                continue
            partial = ix.get("partialFilterExpression") or {}
            if all(flt.get(k) == v for k, v in partial.items()):
                served = True
        if not served:
            out.append(f"{coll} {flt}")
    return out


def test_a_login_reads_only_through_indexes(world, reads):
    m = world.manager()
    world.planner().run_pass()  # a planned window: a login plans the new device at once
    for i in range(20):
        world.user(f"u{i}", device=f"d{i}", token=f"ExponentPushToken[t{i}]", manager=m)
        m.add_reminder(f"u{i}", category="meal", label="lunch", at="12:30")
    finds = reads(lambda: m.register_token("u3", device="new-phone", token="ExponentPushToken[n]"))
    assert finds, "the login read nothing?"
    scans = _unserved(world.db, finds)
    assert not scans, "\n".join(scans)


def test_the_token_index_is_one_the_server_uses():
    """Its partial filter is one a query names (``isActive: true``), with no ``$type`` clause."""
    tokens = dbm.index_plan()[dbm.TOKENS]
    by_name = {m.document["name"]: m.document for m in tokens}
    partial = by_name[dbm.ACTIVE_TOKEN_UNIQUE]["partialFilterExpression"]
    assert partial == {"isActive": True}


def test_a_database_of_an_earlier_version_loses_the_retired_token_index(db):
    """The old index (with ``$type``) would refuse nothing the new one allows, but it costs every
    insert: ``ensure_indexes`` drops it, and creates the new one beside the others."""
    db[dbm.TOKENS].create_index(
        [("token", 1)],
        name="one_active_registration_per_token",
        unique=True,
        partialFilterExpression={"isActive": True, "token": {"$type": "string"}},
    )
    dbm.ensure_indexes(db)
    names = {ix["name"] for ix in db[dbm.TOKENS].list_indexes()}
    assert "one_active_registration_per_token" not in names
    assert dbm.ACTIVE_TOKEN_UNIQUE in names
