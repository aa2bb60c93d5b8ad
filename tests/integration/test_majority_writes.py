"""Issue 34: the writes exactly-once rests on go out with write concern majority (or what
TZPUSH_MONGO__WRITE_CONCERN says), and `tzpush doctor` names the deployment. SecantusDB is one
server presenting itself as a one-member replica set: the concern is sent and accepted here, the
rollback it protects against cannot happen here (docs/architecture.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pymongo import monitoring

from ops.doctor import run_checks
from shared.store import db as dbm
from shared.store.guards import take_guards


class Writes(monitoring.CommandListener):
    """The write concern of each insert into the send guards."""

    def __init__(self) -> None:
        self.concerns: list[Any] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "insert" and event.command.get("insert") == dbm.SENDS:
            self.concerns.append(event.command.get("writeConcern"))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def _guard_concerns(settings: Any) -> list[Any]:
    writes = Writes()
    database = dbm.connect(settings.mongo, event_listeners=[writes])
    try:
        now = dt.datetime.now(dt.UTC)
        assert take_guards(database, ["m-1", "m-2"], "c-1", now) == {"m-1", "m-2"}
    finally:
        database.client.close()
    return writes.concerns


def test_send_guards_are_written_with_majority(world) -> None:
    assert _guard_concerns(world.settings) == [{"w": "majority"}]


def test_the_guards_write_concern_is_a_setting(world) -> None:
    settings = world.settings.model_copy(
        update={"mongo": world.settings.mongo.model_copy(update={"write_concern": "1"})}
    )
    assert _guard_concerns(settings) == [{"w": 1}]


def test_doctor_names_the_embedded_server_as_a_one_member_replica_set(world) -> None:
    dbm.ensure_indexes(world.db)
    row = {c.name: c for c in run_checks(world.settings)}["database topology"]
    assert row.status == "ok", row
    assert "replica set" in row.detail and "(1 member)" in row.detail, row.detail
    assert "guards written with w:majority" in row.detail, row.detail
