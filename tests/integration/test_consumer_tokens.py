"""Issue 5: token hygiene at send time (receipt-time hygiene is in test_receipts.py).

- DeviceNotRegistered in a ticket deactivates the token at once, and a message already planned
  and armed for that token is cancelled, not sent.
- Three consecutive per-message failures deactivate the token; a success resets the count.

Which failures count is the table's to say (``TOKEN_EFFECTS``, shared/domain/outcomes.py). Since
issue 15 no code Expo sends counts: each says the device is gone (deactivated at once) or nothing
about the device (``MessageRateExceeded``, which these tests used to script as "a failure", is a
throttle: sent again, never counted; see test_consumer_expo_errors.py). The rule itself stays,
for a code the table may mark so; the pipeline tests below mark one (``counted``) to prove it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from shared.domain import outcomes
from shared.store import db as dbm
from tests.integration.consumer_support import in_seconds
from tests.integration.harness import World, wait_for

FLAKY = "DeviceFlaky"  # a per-push code Expo does not send: ErrorCode.UNKNOWN


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The table marks an unknown per-push code as one failure against the device (it does not:
    unknown codes leave the token alone), so the consecutive-failure rule can be exercised."""
    codes = outcomes.ErrorCode
    monkeypatch.setitem(outcomes.TOKEN_EFFECTS, codes.UNKNOWN, outcomes.EffectKind.FAIL)
    yield


def _series(world: World, uid: str, n: int, first: dt.datetime, step_s: float) -> list[str]:
    """``n`` messages to ``uid``'s token, ``step_s`` apart (one reminder per label)."""
    p = world.planner()
    ids = []
    for k in range(n):
        due = first + dt.timedelta(seconds=k * step_s)
        ids += [d["_id"] for d in world.due_messages([uid], due, label=f"l{k}", planner=p)]
    return ids


def test_device_not_registered_at_ticket_deactivates_and_blocks_later_push(world):
    m = world.manager()
    dead = world.user("dead", manager=m)
    world.user("alive", manager=m)
    world.fake.configure(dead_at_ticket=[dead["token"]])
    first = in_seconds(3)
    now_ids = world.due_messages(["dead", "alive"], first, label="now", planner=m.planner)
    # Planned and armed before the token died: its snapshot still names the token.
    later = world.due_messages(
        ["dead", "alive"], first + dt.timedelta(seconds=2), label="later", planner=m.planner
    )
    ids = [d["_id"] for d in now_ids + later]
    by_user = {(d["userId"], d["label"]): d["_id"] for d in now_ids + later}
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="all terminal and merged")

    assert world.message(by_user["dead", "now"])["status"] == "failed"
    assert world.message(by_user["dead", "now"])["error"] == "DeviceNotRegistered"
    tok = world.db[dbm.TOKENS].find_one({"_id": dead["_id"]})
    assert tok["isActive"] is False
    assert tok["deactivationReason"] == "DeviceNotRegistered"
    blocked = world.message(by_user["dead", "later"])
    assert blocked["status"] == "cancelled"
    assert blocked["reason"] == "token no longer active (DeviceNotRegistered)"
    assert world.fake.stats()["ticket_errors"] == {"DeviceNotRegistered": 1}  # one try, no more
    assert world.pushes_to(dead["token"]) == []
    assert len(world.pushes_to("ExponentPushToken[alive]")) == 2


def test_three_consecutive_failures_deactivate_the_token(world, counted):
    tok = world.user("flaky")
    world.fake.configure(ticket_errors={tok["token"]: [FLAKY, FLAKY, FLAKY]})
    ids = _series(world, "flaky", 4, in_seconds(3), 1.0)
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 20, what="all terminal and merged")

    st = world.statuses(ids)
    assert [st[i] for i in ids] == ["failed", "failed", "failed", "cancelled"]
    assert {world.message(i)["error"] for i in ids[:3]} == {FLAKY}
    doc = world.db[dbm.TOKENS].find_one({"_id": tok["_id"]})
    assert doc["isActive"] is False
    assert doc["failureCount"] == 3
    assert doc["deactivationReason"] == f"3 consecutive failures (last: {FLAKY})"
    assert world.message(ids[3])["reason"].startswith("token no longer active (3 consecutive")
    assert world.fake.stats()["ticket_errors"] == {FLAKY: 3}
    assert world.pushes_to(tok["token"]) == []


def test_a_success_resets_the_failure_count(world, counted):
    tok = world.user("wobbly")
    world.fake.configure(ticket_errors={tok["token"]: [FLAKY, FLAKY, "ok", FLAKY, FLAKY]})
    ids = _series(world, "wobbly", 5, in_seconds(3), 1.0)
    world.start_consumer()
    wait_for(lambda: world.settled(ids), 25, what="all terminal and merged")

    st = world.statuses(ids)
    assert [st[i] for i in ids] == ["failed", "failed", "success", "failed", "failed"]
    doc = world.db[dbm.TOKENS].find_one({"_id": tok["_id"]})
    assert doc["isActive"] is True  # 2 + reset + 2, never 3 in a row
    assert doc["failureCount"] == 2
    assert len(world.pushes_to(tok["token"])) == 1


def _outcomes(world: World, uid: str, arrivals: list[tuple[int, str]]) -> dict:
    """Apply one token's push outcomes as they arrive: (push number k, kind), push k made at
    t0 + k s. Each arrival reaches the database on its own, as tickets and receipts do."""
    from shared.domain.outcomes import TokenEffect
    from shared.store.tokens import apply_token_effects

    tok = world.user(uid)
    t0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    for k, kind in arrivals:
        effect = TokenEffect(tok["_id"], uid, kind, FLAKY, t0 + dt.timedelta(seconds=k))
        apply_token_effects(world.db, [effect], 3, t0 + dt.timedelta(minutes=5))
    doc = world.db[dbm.TOKENS].find_one({"_id": tok["_id"]})
    assert doc is not None
    return doc


def test_a_late_receipt_for_an_old_success_does_not_wipe_out_newer_failures(world):
    # Pushes 0..4: fail, fail, ok, fail, fail. Push 2's receipt (ok) arrives after push 3's
    # ticket: the run since push 2 is still two failures long (this was a flaky CI failure).
    arrivals = [(0, "fail"), (1, "fail"), (2, "ok"), (3, "fail"), (2, "ok"), (4, "fail")]
    doc = _outcomes(world, "late-ok", arrivals)
    assert (doc["isActive"], doc["failureCount"]) == (True, 2)


def test_an_old_failure_arriving_after_a_reset_does_not_count(world):
    # Push 1's failure (a receipt error) arrives after push 2's success reset the run.
    arrivals = [(0, "fail"), (2, "ok"), (1, "fail"), (3, "fail"), (4, "fail")]
    doc = _outcomes(world, "late-fail", arrivals)
    assert (doc["isActive"], doc["failureCount"]) == (True, 2)


def test_three_failures_deactivate_and_an_older_success_does_not_revive(world):
    doc = _outcomes(world, "unlucky", [(1, "fail"), (2, "fail"), (3, "fail"), (0, "ok")])
    assert (doc["isActive"], doc["failureCount"]) == (False, 3)
    assert doc["deactivationReason"] == f"3 consecutive failures (last: {FLAKY})"


def test_one_batch_is_applied_in_push_order(world):
    from shared.domain.outcomes import TokenEffect
    from shared.store.tokens import apply_token_effects

    tok = world.user("batch")
    t0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
    kinds = ["fail", "fail", "ok", "fail", "fail"]
    effects = [
        TokenEffect(tok["_id"], "batch", k, FLAKY, t0 + dt.timedelta(seconds=i))
        for i, k in enumerate(kinds)
    ]
    apply_token_effects(world.db, effects[::-1], 3, t0 + dt.timedelta(minutes=1))
    doc = world.db[dbm.TOKENS].find_one({"_id": tok["_id"]})
    assert (doc["isActive"], doc["failureCount"]) == (True, 2)
