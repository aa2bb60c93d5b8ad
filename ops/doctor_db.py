"""What the database says, for ``tzpush doctor``: reachability and indexes, clock skew, bad
documents the services skip, and project-level Expo failures.

The checks that read MongoDB, apart from the connectivity checks of ``ops.doctor`` (settings,
broker scheduling, Expo): each returns ``Check`` rows that ``ops.doctor`` renders.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pymongo.database import Database
from pymongo.errors import PyMongoError

from ops import doctor_topology as topology
from shared.clock import Clock, utcnow
from shared.domain.messages import Doc
from shared.domain.outcomes import EXPO_ERRORS, Level
from shared.domain.validation import (
    BadDocument,
    doc_id,
    message_problem,
    receipt_problem,
    reminder_problem,
    token_problem,
    user_problem,
)
from shared.settings import Settings
from shared.store import db as dbm
from shared.store.intent import CHANGE_SKEW
from shared.store.mongo.doctor import as_stages_read, project_failures

SKEW_OK_S = 1.0  # above this, pushes leave this much early or late: warn
SCAN_LIMIT = 20_000  # documents read per kind when looking for bad ones
LIST_BAD = 20  # bad documents named in the check's detail (all are counted)


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_clock(database: Database[Doc], clock: Clock = utcnow) -> Check:
    """How far this host's clock is from the database server's (``hello``'s ``localTime``).

    Warn above ``SKEW_OK_S`` (a consumer on this host sends that much early or late); fail above
    the intent-change log's allowance (``CHANGE_SKEW``, 30 s): beyond it a consumer can miss
    a user's change (a token handed over, a category turned off) made on another host.
    """
    server = dbm.server_clock(database, clock)
    fix = "synchronise this host's clock (NTP: chrony or systemd-timesyncd) and the database's"
    if server is None:
        return Check(
            "clock skew",
            "warn",
            "the database server does not report its time (no localTime in hello): skew "
            "unknown; the janitor waits 15 min longer instead",
            fix,
        )
    skew = server.skew_s
    side = "ahead of" if skew >= 0 else "behind"
    detail = (
        f"this host is {side} the database server by {abs(skew):.3f} s "
        f"(round trip {server.rtt_s * 1000:.0f} ms)"
    )
    allowed = CHANGE_SKEW.total_seconds()
    if abs(skew) - server.rtt_s / 2 > allowed:
        return Check("clock skew", "fail", f"{detail}; more than {allowed:g} s", fix)
    if abs(skew) - server.rtt_s / 2 > SKEW_OK_S:
        return Check("clock skew", "warn", f"{detail}; more than {SKEW_OK_S:g} s", fix)
    return Check("clock skew", "ok", detail)


def check_database(
    settings: Settings, fix_indexes: bool = False, clock: Clock = utcnow
) -> list[Check]:
    mongo = settings.mongo.model_copy(update={"timeout_ms": min(settings.mongo.timeout_ms, 3000)})
    try:
        database = dbm.connect(mongo)
    except Exception as exc:  # the driver refuses the URI itself (options, hosts, ports)
        return [
            Check(
                "database",
                "fail",
                f"cannot use the connection string: {type(exc).__name__}: {str(exc)[:160]}",
                "fix TZPUSH_MONGO__URI",
            )
        ]
    try:
        database.client.admin.command("ping")
    except Exception as exc:
        database.client.close()
        return [
            Check(
                "database",
                "fail",
                f"unreachable: {str(exc)[:160]}",
                "start it (`tzpush services up`) or fix TZPUSH_MONGO__URI",
            )
        ]
    try:
        out = [Check("database", "ok", f"reachable, database {settings.mongo.database!r}")]
        missing = dbm.missing_indexes(database)
        if missing and fix_indexes:
            dbm.ensure_indexes(database)
            out.append(Check("indexes", "ok", f"created {len(missing)}: {', '.join(missing)}"))
        elif missing:
            out.append(
                Check(
                    "indexes",
                    "fail",
                    f"missing: {', '.join(missing)}",
                    "run `tzpush doctor --fix-indexes` (or start the creator once)",
                )
            )
        else:
            out.append(Check("indexes", "ok", f"all {sum(map(len, dbm.index_plan().values()))}"))
        out.append(check_clock(database, clock))
        out.append(check_topology(database, settings))
        out.append(check_documents(database, settings))
        out += check_expo_errors(database, clock)
        return out
    finally:
        database.client.close()


def check_topology(database: Database[Doc], settings: Settings) -> Check:
    """The deployment's shape and write concern (``ops.doctor_topology``)."""
    try:
        verdict = topology.check_topology(database, settings)
    except PyMongoError as exc:
        return Check(topology.NAME, "warn", f"could not ask the server: {str(exc)[:160]}")
    return Check(topology.NAME, verdict.status, verdict.detail, verdict.fix)


def find_bad_documents(
    database: Database[Doc], settings: Settings, limit: int = SCAN_LIMIT
) -> tuple[list[BadDocument], int, list[str]]:
    """The stored documents the services skip as bad: (them, how many were read, notes).

    Reads what each stage reads, at most ``limit`` documents of each kind: active reminders and
    all users and active tokens (the planner), pending messages (the janitor, a re-arm) and
    messages awaiting a receipt (the receipts poller).
    """
    cats = settings.categories
    scans: list[tuple[str, str, Callable[[Doc], str | None]]] = [
        ("reminder", "active reminders", lambda d: reminder_problem(d, cats)),
        ("user", "users", user_problem),
        ("token", "active tokens", token_problem),
        ("message", "pending messages", message_problem),
        ("message", "messages awaiting a receipt", receipt_problem),
    ]
    bad: dict[tuple[str, str], BadDocument] = {}
    read = 0
    notes: list[str] = []
    for kind, what, problem_of in scans:
        n = 0
        try:
            for d in as_stages_read(database, what, limit):
                n += 1
                problem = problem_of(d)
                if problem is not None:
                    found = BadDocument(kind, doc_id(d), problem)
                    bad.setdefault((found.kind, found.id), found)
        except Exception as exc:  # a read that fails is said, not raised: the other checks stand
            notes.append(f"could not read {what}: {type(exc).__name__}: {str(exc)[:80]}")
        read += n
        if n >= limit:
            notes.append(f"only the first {limit:,} {what} were read")
    return list(bad.values()), read, notes


def check_documents(database: Database[Doc], settings: Settings) -> Check:
    """Stored documents the services skip (each with a log line and the metric when met)."""
    bad, read, notes = find_bad_documents(database, settings)
    note = f" ({'; '.join(notes)})" if notes else ""
    if not bad:
        return Check("documents", "warn" if notes else "ok", f"{read:,} read, none bad{note}")
    listed = "; ".join(b.describe() for b in bad[:LIST_BAD])
    more = f"; and {len(bad) - LIST_BAD} more" if len(bad) > LIST_BAD else ""
    return Check(
        "documents",
        "warn",
        f"{len(bad)} bad document(s), skipped by the services: {listed}{more}{note}",
        "fix or remove them (`tzpush users upsert`, `tzpush reminders update|remove`, "
        "`tzpush tokens unregister`); until then each is skipped with a log line "
        "(tzpush_bad_documents_total)",
    )


PROJECT_ERRORS_SINCE = dt.timedelta(hours=1)  # how far back `expo errors` looks
PROJECT_ERRORS_READ = 1000  # failed messages read at most (enough to say "it happens")


def check_expo_errors(
    database: Database[Doc], clock: Clock = utcnow, since: dt.timedelta = PROJECT_ERRORS_SINCE
) -> list[Check]:
    """Pushes that failed lately for a project-level Expo error (``InvalidCredentials``,
    ``MismatchSenderId``, ``UNAUTHORIZED``: the project's credentials, never a device's), from
    the messages' ``errorCode`` and their receipts' errors. The consumers alert on them too
    (``tzpush_expo_project_errors_total``, /healthz); this says so from any host. No index
    serves the question: it reads the collection, which is fine for an operator's command."""
    now = clock()
    codes = sorted(c.value for c, m in EXPO_ERRORS.items() if m.level is Level.PROJECT)
    after = now - since
    seen: Counter[str] = Counter()
    last: dt.datetime | None = None
    try:
        for d in project_failures(database, codes, after, PROJECT_ERRORS_READ):
            receipt = d.get("receipt") or {}
            code = d.get("errorCode") if d.get("errorCode") in codes else receipt.get("error")
            at = d.get("finishedAt") if code == d.get("errorCode") else receipt.get("checkedAt")
            seen[str(code)] += 1
            if isinstance(at, dt.datetime) and (last is None or at > last):
                last = at
    except PyMongoError as exc:
        return [Check("expo errors", "warn", f"could not read the messages: {str(exc)[:160]}")]
    hours = f"{since.total_seconds() / 3600:g} h"
    if not seen:
        return [
            Check("expo errors", "ok", f"no push failed for the project's credentials in {hours}")
        ]
    counted = ", ".join(f"{n} push(es) with {code}" for code, n in sorted(seen.items()))
    more = "at least " if sum(seen.values()) >= PROJECT_ERRORS_READ else ""
    when = f", the last at {last:%Y-%m-%dT%H:%M:%SZ}" if last else ""
    return [
        Check(
            "expo errors",
            "fail",
            f"{more}{counted} failed in the last {hours}{when}: the project's push credentials "
            "(or access token) are wrong, not the devices (tokens untouched)",
            "fix the project's credentials (Android: the FCM key and google-services.json of one "
            "sender id; iOS: `eas credentials`; or TZPUSH_EXPO__ACCESS_TOKEN), then "
            "`tzpush replay --status failed --cause credentials`",
        )
    ]
