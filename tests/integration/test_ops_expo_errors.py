"""Issue 15, "Expo errors mean what Expo says", for the operator: ``tzpush doctor`` names
project-level failures, and ``tzpush replay --status failed`` sends again what failed for a
project-level cause (credentials, Expo down past the retries), each at most once, and nothing a
device refused or Expo may already have taken.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ops import doctor
from ops.replay import Replayer, Selection, select
from shared.clock import utcnow
from shared.domain.messages import Status
from shared.errors import InputError
from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds
from tests.integration.harness import World, wait_for
from tests.integration.ops_helpers import run_cli


def failed(world: World, uid: str, code: str, label: str, *, receipt: bool = False) -> str:
    """One message due an hour ago that ended ``failed`` with ``code``, as the consumer (or,
    ``receipt=True``, the receipts poller) writes it."""
    due = (utcnow() - dt.timedelta(hours=1)).replace(microsecond=0)
    (doc,) = world.due_messages([uid], due, arm=False, category="safety", label=f"f-{uid}")
    now = utcnow()
    if receipt:
        fields: dict[str, Any] = {
            "status": "failed",
            "reason": f"receipt error {code}: scripted",
            "ticketId": f"tk-{uid}",
            "sentAt": now,
            "finishedAt": now,
            "receipt": {"state": "error", "error": code, "checkedAt": now},
        }
    else:
        fields = {
            "status": "failed",
            "reason": f"{label}: scripted",
            "error": label,
            "errorCode": code,
            "finishedAt": now,
            "attempts": 1,
        }
    world.db[dbm.MESSAGES].update_one({"_id": doc["_id"]}, {"$set": fields})
    return str(doc["_id"])


def test_replay_failed_sends_project_level_failures_once_and_nothing_else(world, capsys):
    m = world.manager()
    for u in ("cred", "auth", "down", "recv", "dead", "unsure", "big", "novel"):
        world.user(u, "Europe/Berlin", manager=m)
    again = {
        "cred": failed(world, "cred", "InvalidCredentials", "InvalidCredentials"),
        "auth": failed(world, "auth", "UNAUTHORIZED", "UNAUTHORIZED"),
        "down": failed(world, "down", "ServerError", "HTTP 503 after 8 retries"),
        "recv": failed(world, "recv", "MismatchSenderId", "", receipt=True),
    }
    never = {
        "dead": failed(world, "dead", "DeviceNotRegistered", "DeviceNotRegistered"),
        "unsure": failed(world, "unsure", "OutcomeUnknown", "network error (ReadTimeout)"),
        "big": failed(world, "big", "MessageTooBig", "MessageTooBig"),
        "novel": failed(world, "novel", "UnknownError", "SomethingNew"),
    }
    before = {u: world.message(i) for u, i in {**again, **never}.items()}
    args = ("replay", "--status", "failed", "--yes", "--by", "ops", "--reason", "INC-7 creds")
    assert run_cli(world.settings, *args) == 0
    assert run_cli(world.settings, *args) == 0
    out = capsys.readouterr().out
    assert "replayed: success 4" in out
    assert "nothing to replay" in out  # the second run found nothing left

    assert sorted(p["to"] for p in world.fake.pushes()) == sorted(
        f"ExponentPushToken[{u}]" for u in again
    )
    for u, mid in again.items():
        doc = world.message(mid)
        assert doc["status"] == "success" and doc["ticketId"] != f"tk-{u}"
        assert doc["receipt"]["state"] == "pending"
        assert "error" not in doc and "errorCode" not in doc
        assert doc["replay"]["from"] == "failed"
        assert doc["replay"]["failedReason"] == before[u]["reason"]
        assert doc["replay"]["reason"] == "INC-7 creds"
    for u, mid in never.items():
        assert world.message(mid) == before[u], u


def test_replay_failed_by_cause_with_a_dry_run(world, capsys):
    m = world.manager()
    for u in ("cred", "down"):
        world.user(u, "UTC", manager=m)
    cred = failed(world, "cred", "InvalidCredentials", "InvalidCredentials")
    down = failed(world, "down", "NetworkError", "network error (ConnectionError) after 8 retries")
    args = ("replay", "--status", "failed", "--cause", "credentials")
    assert run_cli(world.settings, *args, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "1 message(s) would be replayed" in out and cred[:20] in out and down[:20] not in out
    assert run_cli(world.settings, *args, "--yes") == 0
    assert world.message(cred)["status"] == "success"
    assert world.message(down)["status"] == "failed"
    assert (
        run_cli(world.settings, "replay", "--status", "failed", "--cause", "expo-down", "--yes")
        == 0
    )
    assert world.message(down)["status"] == "success"
    assert len(world.fake.pushes()) == 2
    with pytest.raises(InputError, match="a cause selects failed messages"):
        run_cli(world.settings, "replay", "--cause", "credentials", "--yes")
    with pytest.raises(InputError, match="nonsense"):
        run_cli(world.settings, "replay", "--status", "failed", "--cause", "nonsense", "--yes")


class _BrokenSender:
    """A sender whose client breaks before any request leaves."""

    def prepare(self, pushes: Any) -> Any:
        raise AssertionError("not used")

    def send(self, *args: Any, **kw: Any) -> Any:
        raise RuntimeError("the Expo client broke")

    def close(self) -> None:
        pass


def test_a_stopped_replay_gives_failed_messages_back_to_failed(world):
    world.user("stop", "UTC")
    mid = failed(world, "stop", "InvalidCredentials", "InvalidCredentials")
    before = world.message(mid)
    sel = Selection(status=Status.FAILED)
    docs = select(world.db, sel)
    assert [d["_id"] for d in docs] == [mid]
    r = Replayer(world.db, world.settings, _BrokenSender(), "ops", "test", selection=sel)
    with pytest.raises(RuntimeError, match="broke"):
        r.run(docs)
    doc = world.message(mid)
    assert doc["status"] == "failed"  # where it came from, not is_missed
    assert (doc["reason"], doc["errorCode"]) == (before["reason"], "InvalidCredentials")
    assert [d["_id"] for d in select(world.db, sel)] == [mid]  # a later replay can take it
    assert world.fake.pushes() == []


def test_doctor_names_project_level_failures(world):
    dbm.ensure_indexes(world.db)
    (clean,) = doctor.check_expo_errors(world.db)
    assert clean.status == "ok"
    t = world.user("drcreds")
    world.fake.configure(ticket_errors={t["token"]: ["InvalidCredentials"]})
    ids = [d["_id"] for d in world.due_messages(["drcreds"], in_seconds(3))]
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="terminal and merged")

    (check,) = doctor.check_expo_errors(world.db)
    assert check.status == "fail"
    assert "InvalidCredentials" in check.detail and "1 push" in check.detail
    assert "credentials" in check.fix and "tzpush replay --status failed" in check.fix


def test_failed_messages_edited_by_hand_neither_stop_a_replay_nor_stay_stuck(world, capsys):
    """A code that is a list, a receipt that is a list: not a cause (and no crash of the
    selection, the dry run, or the console's problems and message pages); a message with a
    cause code and a receipt written as a list is taken and sent, not "skipped" forever."""
    from api.console.figures import ProblemFilter, problems, replayable_failed

    for u in ("hx1", "hx2", "hx3"):
        world.user(u, "Europe/Berlin")
    odd_code = failed(world, "hx1", "InvalidCredentials", "InvalidCredentials")
    world.db[dbm.MESSAGES].update_one({"_id": odd_code}, {"$set": {"errorCode": ["x"]}})
    odd_receipt = failed(world, "hx2", "InvalidCredentials", "r", receipt=True)
    world.db[dbm.MESSAGES].update_one(
        {"_id": odd_receipt}, {"$set": {"receipt": {"state": "error", "error": ["x"]}}}
    )
    listed = failed(world, "hx3", "InvalidCredentials", "InvalidCredentials")
    world.db[dbm.MESSAGES].update_one({"_id": listed}, {"$set": {"receipt": [{"error": "y"}]}})

    assert [d["_id"] for d in select(world.db, Selection(status=Status.FAILED))] == [listed]
    page = problems(world.db, ProblemFilter(status="failed"))
    assert (page.total, page.replayable) == (3, 1)
    assert [replayable_failed(world.db, i) for i in (odd_code, odd_receipt, listed)] == [
        False,
        False,
        True,
    ]
    assert run_cli(world.settings, "replay", "--status", "failed", "--dry-run") == 0
    args = ("replay", "--status", "failed", "--yes", "--by", "t", "--reason", "INC-2")
    assert run_cli(world.settings, *args) == 0
    assert world.message(listed)["status"] == "success"
    assert [p["to"] for p in world.fake.pushes()] == ["ExponentPushToken[hx3]"]
