"""The chaos checker on small recorded runs made here: each kind of violation is caught, and a
clean run passes (a checker that finds nothing proves nothing)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from chaoscheck import history as hist
from chaoscheck import invariants as inv
from chaoscheck import localtime
from chaoscheck.run import check, check_dir

T0 = dt.datetime(2026, 6, 1, 10, 0, tzinfo=dt.UTC).timestamp()  # 12:00 in Paris
DUE = T0 + 300  # r1 at 12:05 Paris
Doc = dict[str, Any]


def req(method: str, path: str, body: Any, status: int | None, start: float, **kw: Any) -> Doc:
    return {
        "method": method,
        "path": path,
        "body": body,
        "status": status,
        "answer": kw.get("answer"),
        "start": start,
        "end": kw.get("end", start + 0.05),
    }


def reminder(at: str = "12:05", rev: int = 1, **extra: Any) -> Doc:
    return {
        "category": "meal",
        "label": "lunch",
        "at": at,
        "offsetMinutes": 0,
        "data": {"uid": "u1", "rid": "r1", "rev": rev},
        **extra,
    }


def push(t: float, to: str = "T1", rev: int = 1, version: int = 1) -> Doc:
    data = {
        "uid": "u1",
        "rid": "r1",
        "rev": rev,
        "category": "meal",
        "messageId": f"r1:{version}:reg1:20260601",
    }
    return {"to": to, "data": data, "received_at_ms": int(t * 1000), "ticket_id": "x"}


def message(status: str = "success", reason: str | None = None, **extra: Any) -> Doc:
    return {
        "_id": "r1:1:reg1:20260601",
        "userId": "u1",
        "reminderId": "r1",
        "token": "T1",
        "localDate": "2026-06-01",
        "scheduledAt": "2026-06-01T10:05:00+00:00",
        "status": status,
        "reason": reason,
        **extra,
    }


def base_history() -> list[Doc]:
    return [
        req("PUT", "/v1/users/u1", {"timezone": "Europe/Paris"}, 201, T0 - 100),
        req("PUT", "/v1/users/u1/devices/d1", {"token": "T1"}, 200, T0 - 90),
        req("PUT", "/v1/users/u1/reminders/r1", reminder(), 201, T0 - 80),
    ]


def make_run(
    records: list[Doc] | None = None,
    pushes: list[Doc] | None = None,
    faults: list[Doc] | None = None,
    db: dict[str, list[Doc]] | None = None,
) -> inv.Run:
    meta = {
        "seed": 1,
        "window_s": 1.0,
        "grace": {"meal": 60},
        "workload_start": T0 - 100,
        "cutoff": T0 + 600,
    }
    return inv.Run(
        meta,
        hist.from_records(records if records is not None else base_history()),
        pushes if pushes is not None else [push(DUE + 0.2)],
        faults or [],
        db if db is not None else {"notification_messages": [message()]},
    )


def failing(run: inv.Run) -> list[str]:
    return [v["name"][0] for v in check(run)["verdicts"] if not v["ok"]]


def test_a_clean_run_passes_every_invariant() -> None:
    assert failing(make_run()) == []


def test_a_second_push_of_one_occurrence_to_one_install_is_caught() -> None:
    assert failing(make_run(pushes=[push(DUE + 0.2), push(DUE + 5)])) == ["1"]


def test_a_push_after_an_acknowledged_logout_is_caught() -> None:
    records = [*base_history(), req("DELETE", "/v1/users/u1/devices/d1", None, 204, T0 + 200)]
    assert "2" in failing(make_run(records))


def test_a_push_after_an_acknowledged_handover_is_caught() -> None:
    records = [
        *base_history(),
        req("PUT", "/v1/users/u2", {"timezone": "UTC"}, 201, T0 + 100),
        req("PUT", "/v1/users/u2/devices/d9", {"token": "T1"}, 200, T0 + 200),
    ]
    assert "2" in failing(make_run(records))


def test_a_handover_acknowledged_inside_the_window_is_not_judged() -> None:
    records = [
        *base_history(),
        req("PUT", "/v1/users/u2", {"timezone": "UTC"}, 201, T0 + 100),
        req("PUT", "/v1/users/u2/devices/d9", {"token": "T1"}, 200, DUE - 0.5),
    ]
    assert failing(make_run(records)) == []


@pytest.mark.parametrize(
    "change",
    [
        req("DELETE", "/v1/users/u1/reminders/r1", None, 204, T0 + 200),
        req("PATCH", "/v1/users/u1/reminders/r1", {"active": False}, 200, T0 + 200),
        req("PUT", "/v1/users/u1/reminders/r1", reminder("12:07", rev=2), 200, T0 + 200),
        req("PUT", "/v1/users/u1", {"timezone": "Europe/Paris", "enabled": False}, 200, T0 + 200),
        req(
            "PUT",
            "/v1/users/u1",
            {"timezone": "Europe/Paris", "categories": {"meal": False}},
            200,
            T0 + 200,
        ),
        req("PUT", "/v1/users/u1", {"timezone": "Europe/London"}, 200, T0 + 200),
        req(
            "POST",
            "/v1/batch",
            {
                "items": [
                    {
                        "op": "reminder",
                        "userId": "u1",
                        "reminderId": "r1",
                        "reminder": reminder(active=False),
                    }
                ]
            },
            200,
            T0 + 200,
            answer={"results": [{"status": 200}]},
        ),
    ],
    ids=["removed", "paused", "replaced", "user-off", "category-off", "zone-moved", "batch"],
)
def test_a_push_for_intent_withdrawn_before_the_window_is_caught(change: Doc) -> None:
    assert "3" in failing(make_run([*base_history(), change]))


def test_a_withdrawal_that_failed_or_came_too_late_is_not_a_violation() -> None:
    refused = req("DELETE", "/v1/users/u1/reminders/r1", None, 404, T0 + 200)
    late = req("PATCH", "/v1/users/u1/reminders/r1", {"active": False}, 200, DUE - 0.3)
    assert failing(make_run([*base_history(), refused, late])) == []


def test_an_early_push_is_caught_even_by_a_millisecond() -> None:
    assert "4" in failing(make_run(pushes=[push(DUE - 0.001)]))


def test_a_push_on_a_weekday_the_rule_does_not_have_is_caught() -> None:
    records = base_history()
    records[2] = req("PUT", "/v1/users/u1/reminders/r1", reminder(weekdays=["sat"]), 201, T0 - 80)
    assert "4" in failing(make_run(records))  # 2026-06-01 is a Monday


def test_an_occurrence_never_pushed_and_not_ended_is_caught() -> None:
    assert failing(make_run(pushes=[], db={"notification_messages": []})) == ["5"]


def test_a_message_left_pending_after_the_drain_is_caught() -> None:
    db = {"notification_messages": [message(), message("pending", _id="other")]}
    assert failing(make_run(db=db)) == ["5"]


def test_a_miss_is_honest_only_with_a_fault_near_it() -> None:
    db = {"notification_messages": [message("is_missed", "900 s late, grace 60 s")]}
    assert failing(make_run(pushes=[], db=db)) == ["5"]
    fault = {"kind": "kill9", "target": "consumer-1", "start": DUE - 30, "end": DUE + 100}
    assert failing(make_run(pushes=[], db=db, faults=[fault])) == []


def test_an_install_expo_declared_dead_is_owed_nothing_until_it_logs_in_again() -> None:
    dead = {
        "kind": "expo_dnr",
        "target": "expo",
        "start": DUE - 100,
        "end": DUE - 90,
        "detail": {"token": "T1"},
    }
    db = {"notification_messages": []}
    assert failing(make_run(pushes=[], db=db, faults=[dead])) == []
    login = req("PUT", "/v1/users/u1/devices/d1", {"token": "T1"}, 200, DUE - 60)
    assert failing(make_run([*base_history(), login], pushes=[], db=db, faults=[dead])) == ["5"]


def test_a_push_past_its_grace_is_caught() -> None:
    assert "5" in failing(make_run(pushes=[push(DUE + 63)]))


def test_a_late_push_is_honest_only_as_a_replay_an_operator_asked_for_before_it() -> None:
    """Seed 7: a message ended is_missed, replayed through the API, pushed 164 s late."""
    late = push(DUE + 163)
    late["data"]["replayed"] = True
    named = {"messages": [{"id": late["data"]["messageId"]}], "selected": 1}
    other = {"messages": [{"id": "r9:1:reg9:20260601"}], "selected": 1}
    replayed = {"from": "is_missed", "missedReason": "consumer stopped before sending"}
    missed = message("success", "accepted by Expo (replayed)", replay=replayed)
    db = {"notification_messages": [missed]}
    fault = {"kind": "kill9", "target": "consumer-1", "start": DUE - 5, "end": DUE + 5}

    def replay(answer: Doc, status: int = 202, at: float = DUE + 150) -> Doc:
        return req("POST", "/v1/replays", {"status": "is_missed"}, status, at, answer=answer)

    def judged(*extra: Doc) -> list[str]:
        run = make_run([*base_history(), *extra], pushes=[late], faults=[fault], db=db)
        return failing(run)

    assert judged(replay(named)) == []
    assert judged() == ["5"]  # no replay asked for
    assert judged(replay(other)) == ["5"]  # a replay of other messages
    assert judged(replay(named, status=503)) == ["5"]  # not acknowledged
    assert judged(replay(named, at=DUE + 170)) == ["5"]  # asked for after the push


def test_anything_of_an_erased_user_left_is_caught() -> None:
    records = [*base_history(), req("DELETE", "/v1/users/u1", None, 204, T0 + 400)]
    anonymised = {"notification_messages": [message(userId="erased-1", token=None)]}
    assert failing(make_run(records, db=anonymised)) == []
    db = {**anonymised, "users": [{"_id": "u1", "timezone": "Europe/Paris"}]}
    assert failing(make_run(records, db=db)) == ["6"]
    read = req("GET", "/v1/users/u1", None, 200, T0 + 500, answer={"id": "u1"})
    assert failing(make_run([*records, read], db={"notification_messages": []})) == ["6"]


def test_an_install_that_moved_to_another_user_is_not_the_erased_users() -> None:
    records = [
        *base_history(),
        req("PUT", "/v1/users/u2", {"timezone": "UTC"}, 201, T0 + 100),
        req("PUT", "/v1/users/u2/devices/d9", {"token": "T1"}, 200, T0 + 350),
        req("DELETE", "/v1/users/u1", None, 204, T0 + 400),
    ]
    db = {"notification_tokens": [{"_id": "reg9", "userId": "u2", "token": "T1"}]}
    assert failing(make_run(records, db=db)) == []


def test_a_user_erased_and_created_again_is_not_erased() -> None:
    records = [
        *base_history(),
        req("DELETE", "/v1/users/u1", None, 204, T0 + 400),
        req("PUT", "/v1/users/u1", {"timezone": "UTC"}, 201, T0 + 450),
    ]
    db = {"notification_messages": [message()], "users": [{"_id": "u1", "timezone": "UTC"}]}
    assert failing(make_run(records, db=db)) == []


def test_concurrent_changes_are_judged_only_when_every_order_agrees() -> None:
    pause = req(
        "PATCH", "/v1/users/u1/reminders/r1", {"active": False}, 200, T0 + 200, end=T0 + 201
    )
    resume = req("PATCH", "/v1/users/u1/reminders/r1", {"active": True}, 200, T0 + 200.5)
    assert failing(make_run([*base_history(), pause, resume])) == []
    other = req("PATCH", "/v1/users/u1/reminders/r1", {"active": False}, 200, T0 + 200.5)
    assert failing(make_run([*base_history(), pause, other])) == ["3"]


def test_a_gap_time_moves_forward_by_the_gap_and_an_overlap_takes_the_earlier() -> None:
    gap = localtime.due("02:30", 0, None, "Europe/Paris", dt.date(2026, 3, 29))
    assert gap == dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)  # 03:30 CEST
    overlap = localtime.due("02:30", 5, None, "Europe/Paris", dt.date(2026, 10, 25))
    assert overlap == dt.datetime(2026, 10, 25, 0, 35, tzinfo=dt.UTC)  # 02:30 CEST + 5 min


def test_the_checker_writes_its_report_and_picture(tmp_path: Path) -> None:
    run = make_run()
    (tmp_path / "meta.json").write_text(json.dumps(run.meta))
    (tmp_path / "history.jsonl").write_text("\n".join(json.dumps(r) for r in base_history()))
    (tmp_path / "pushes.json").write_text(json.dumps(run.pushes))
    (tmp_path / "faults.jsonl").write_text(
        json.dumps({"kind": "stop", "target": "mongo", "start": T0, "end": T0 + 3}) + "\n"
    )
    (tmp_path / "db.json").write_text(json.dumps(run.db))
    report = check_dir(tmp_path)
    assert report["ok"]
    assert json.loads((tmp_path / "report.json").read_text())["ok"]
    assert (tmp_path / "run.png").stat().st_size > 1000
