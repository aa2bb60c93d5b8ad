"""Invariants 5 (every occurrence ends, honestly) and 6 (nothing of an erased user is left)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from chaoscheck import localtime
from chaoscheck.intent import AMBIGUOUS
from chaoscheck.invariants import (
    EXPECT_SETTLE_S,
    FAULT_REACH_S,
    GRACE_SLACK_S,
    Run,
    _iso,
    _ts,
    parse_message_id,
    placed,
    push_time,
)

Doc = dict[str, Any]
OPEN = ("pending", "sending")
ENDED_BY_FAULT = ("is_missed", "failed", "cancelled")
KEPT_BY_DESIGN = ("intent_changes",)  # the bare id and erasure stamp, for a week (docs/api.md)


def _fault_near(run: Run, start: float, end: float) -> list[Doc]:
    return [f for f in run.faults if _ts(f["start"]) <= end and _ts(f["end"]) >= start]


def _declared_dead(run: Run, token: str, due: float) -> bool:
    """Whether Expo said DeviceNotRegistered for ``token`` (a fault) before ``due`` and no
    login with it started since: token hygiene deactivates it, nothing more is owed to it."""
    deaths = [
        _ts(f["start"])
        for f in run.faults
        if f.get("kind") == "expo_dnr" and (f.get("detail") or {}).get("token") == token
    ]
    deaths = [t for t in deaths if t < due]
    if not deaths:
        return False
    logins = run.intent.history.of("login")
    return not any(c.token == token and c.start > max(deaths) for c in logins)


def _expected(run: Run) -> list[Doc]:
    """Every occurrence due in the run's span whose intent stood, settled, EXPECT_SETTLE_S
    before its due instant: rule, user, category and the install it goes to."""
    lo = dt.datetime.fromtimestamp(float(run.meta["workload_start"]), dt.UTC)
    hi = dt.datetime.fromtimestamp(float(run.meta["cutoff"]), dt.UTC)
    seen: set[tuple[str, str, str, Any]] = set()
    out = []
    intent = run.intent
    for c in run.history.changes:
        if c.kind not in ("reminder", "patch") or c.outcome != "ok" or "at" not in c.body:
            continue
        rev = (c.body.get("data") or {}).get("rev")
        content = intent.content(rev)
        if content is None:
            continue
        for zone in intent.zones(c.user, float(run.meta["cutoff"])):
            for day, instant in localtime.occurrences(
                content["at"], content["offsetMinutes"], content["weekdays"], zone, lo, hi
            ):
                key = (c.key, str(day), zone, rev)
                if key in seen:
                    continue
                seen.add(key)
                due = instant.timestamp()
                rem = intent.reminder(c.key, due, EXPECT_SETTLE_S)
                user = intent.user(c.user, due, EXPECT_SETTLE_S)
                if AMBIGUOUS in (rem, user) or not rem.get("exists") or not rem.get("active"):
                    continue
                if rem.get("rev") != rev or not user.get("exists") or user.get("tz") != zone:
                    continue
                if not user.get("enabled") or user["categories"].get(content["category"]) is False:
                    continue
                for token in sorted(intent.tokens_of.get(c.user, ())):
                    inst = intent.install(token, due, EXPECT_SETTLE_S)
                    if inst is AMBIGUOUS or not inst["holder"] or inst["holder"][0] != c.user:
                        continue
                    if _declared_dead(run, token, due):
                        continue
                    out.append(
                        dict(
                            uid=c.user,
                            rid=c.key,
                            rev=rev,
                            local_date=str(day),
                            zone=zone,
                            due=due,
                            token=token,
                            category=content["category"],
                        )
                    )
    return out


def every_occurrence_ends(run: Run) -> tuple[int, list[Doc]]:
    """5. Every expected occurrence was pushed within its grace, or ended is_missed, failed or
    cancelled with a reason while a fault was near; no push went past its grace; nothing
    due by the cutoff is still pending or sending after the drain."""
    bad: list[Doc] = []
    pushed: dict[tuple[str, str, str], list[Doc]] = defaultdict(list)
    for p in run.pushes:
        data = p.get("data") or {}
        parsed = parse_message_id(data.get("messageId", ""))
        if parsed:
            pushed[(p["to"], str(data.get("rid")), str(parsed[3]))].append(p)
        where = placed(run, p)
        if where and where.get("due") and not where.get("early"):
            late = push_time(p) - where["due"]
            grace = run.grace(str(data.get("category")))
            if late > grace + GRACE_SLACK_S and not replay_asked(run, p):
                bad.append({"why": f"sent {late:.1f} s late, grace {grace:.0f} s", "push": p})
    docs: dict[tuple[str, str], list[Doc]] = defaultdict(list)
    messages = run.db.get("notification_messages", [])
    for m in messages:
        docs[(str(m.get("reminderId")), str(m.get("localDate")))].append(m)
    expected = _expected(run)
    for occ in expected:
        grace = run.grace(occ["category"])
        hits = [
            p
            for p in pushed.get((occ["token"], occ["rid"], occ["local_date"]), [])
            if occ["due"] <= push_time(p) <= occ["due"] + grace + GRACE_SLACK_S
        ]
        if hits:
            continue
        faults = _fault_near(run, occ["due"] - FAULT_REACH_S, occ["due"] + grace)
        ended = [
            m
            for m in docs.get((occ["rid"], occ["local_date"]), [])
            if _first_end(m)[0] in ENDED_BY_FAULT
            and _first_end(m)[1]
            and m.get("token") in (occ["token"], None)
        ]
        if ended and faults:
            continue
        why = "ended without a fault near" if ended else "never pushed and no honest end"
        found = docs.get((occ["rid"], occ["local_date"]), [])
        bad.append(
            {
                "why": why,
                "occurrence": {**occ, "due": _iso(occ["due"])},
                "documents": found,
                "faults_near": faults,
            }
        )
    cutoff = float(run.meta["cutoff"])
    for m in messages:
        if m.get("status") in OPEN and _ts(m["scheduledAt"]) <= cutoff:
            bad.append({"why": f"still {m.get('status')} after the drain", "document": m})
    return len(expected) + len(messages), bad


def _first_end(m: Doc) -> tuple[Any, Any]:
    """(status, reason) a message first ended with: a replayed one's from before its replay."""
    replay = m.get("replay") or {}
    if replay.get("from") in ENDED_BY_FAULT:
        return replay["from"], replay.get("missedReason") or replay.get("reason")
    return m.get("status"), m.get("reason")


def replay_asked(run: Run, p: Doc) -> bool:
    """Whether push ``p`` is a replay an operator asked for before it arrived: marked replayed,
    and named in the answer of an acknowledged ``POST /v1/replays`` that started before it."""
    data = p.get("data") or {}
    if not data.get("replayed"):
        return False
    mid = data.get("messageId")
    for rec in run.history.records:
        status = rec.get("status")
        if rec["method"] != "POST" or rec["path"].split("?")[0] != "/v1/replays":
            continue
        if status is None or not 200 <= status < 300 or rec["start"] >= push_time(p):
            continue
        if any(m.get("id") == mid for m in (rec.get("answer") or {}).get("messages", [])):
            return True
    return False


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def erased_users(run: Run) -> dict[str, set[str]]:
    """Users whose erasure was acknowledged and never followed by a new user of that id, with
    their install tokens that no other user ever logged in with (an install that moved to
    someone else is theirs, whenever it moved)."""
    out: dict[str, set[str]] = {}
    h = run.history
    for e in h.of("erase"):
        if e.outcome != "ok":
            continue
        later = [
            c for c in h.of("user", user=e.user) if c.start >= e.start and c.outcome != "refused"
        ]
        later += [c for c in h.of("erase", user=e.user) if c.start > e.end and c.outcome != "ok"]
        if later:
            out.pop(e.user, None)
            continue
        out[e.user] = {
            token
            for token in run.intent.tokens_of.get(e.user, ())
            if not any(c.token == token and c.user != e.user for c in h.of("login"))
        }
    return out


def nothing_of_erased_left(run: Run) -> tuple[int, list[Doc]]:
    """6. No document outside the erasure stamp holds an erased user's id or install token,
    and no read after the erasure answered anything of theirs."""
    erased = erased_users(run)
    bad: list[Doc] = []
    for name, docs in run.db.items():
        if name in KEPT_BY_DESIGN:
            continue
        for d in docs:
            words = _strings(d)
            for uid, tokens in erased.items():
                hit = [w for w in words if uid in w or w in tokens]
                if hit:
                    bad.append({"collection": name, "user": uid, "found": hit[:3], "document": d})
    for rec in run.history.records:
        if rec["method"] != "GET" or rec.get("status") != 200:
            continue
        parts = rec["path"].split("?")[0].strip("/").split("/")
        reader = parts[2] if parts[:2] == ["v1", "users"] and len(parts) > 2 else ""
        if reader not in erased:
            continue
        erasures = run.history.of("erase", user=reader)
        erase_end = max(e.end for e in erasures if e.outcome == "ok")
        answer = rec.get("answer") or {}
        if rec["start"] > erase_end and (not isinstance(answer, dict) or answer.get("items", True)):
            bad.append({"user": reader, "read": rec})
    return len(erased), bad
