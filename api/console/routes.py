"""The console's pages and actions under ``/console`` (not in the OpenAPI document).

Pages (GET, a session needed): the overview, its health checks, upcoming, problems, a replay
being watched, a user, a message. Actions (POST, a session and its CSRF token needed, refused
in read-only mode): a replay's dry run and its confirmation. Logging in and out are POSTs too,
each with its own token. Every page works without script; ``static/console.js`` only loads the
health checks after the page and refreshes a replay until its messages have ended.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api import checks
from api.console import charts, figures, records, replays
from api.console.session import COOKIE, COOKIE_PATH, LOGIN_COOKIE, LOGIN_TTL_S
from api.console.web import (
    PREFIX,
    Action,
    Checked,
    ConsoleDep,
    ConsoleError,
    ConsoleRoute,
    Form,
    Operator,
    first,
    render,
    safe_next,
)
from ops.replay import Selection
from shared.domain.messages import Status
from shared.domain.validation import category_problem, id_problem, shown
from shared.errors import InputError

log = logging.getLogger(__name__)

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)
Part = Annotated[bool, Query(description="only the part of the page that refreshes")]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


# -- logging in and out ----------------------------------------------------------------------
def _login_page(
    request: Request, c: ConsoleDep, next_url: str, error: str = "", status: int = 200
) -> HTMLResponse:
    nonce = c.sessions.login_nonce()
    response = render(
        request,
        "login.html",
        status,
        login_token=c.sessions.login_token(nonce),
        next_url=next_url,
        error=error,
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=LOGIN_TTL_S,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    return response


@router.get("")
def root() -> RedirectResponse:
    return RedirectResponse(PREFIX + "/", status_code=307)


@router.get("/login")
def login_form(
    request: Request, c: ConsoleDep, next: Annotated[str, Query(max_length=2048)] = ""
) -> Response:
    if c.sessions.read(request.cookies.get(COOKIE)) is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    return _login_page(request, c, safe_next(next))


@router.post("/login")
def login(request: Request, c: ConsoleDep, form: Form) -> Response:
    next_url = safe_next(first(form, "next"))
    if not c.sessions.login_ok(request.cookies.get(LOGIN_COOKIE), first(form, "csrf")):
        log.warning("console login refused: the form's token is missing or stale")
        return _login_page(
            request,
            c,
            next_url,
            "This login form has expired or did not come from this page. Try again.",
            403,
        )
    principal = c.backend.keys.identify(first(form, "key").strip() or None)
    if principal is None:
        log.warning("console login refused: not a known key")
        return _login_page(
            request,
            c,
            next_url,
            "That key is not known here. Log in with an ops key of TZPUSH_API__KEYS "
            "(make one: tzpush api --new-key NAME --scope ops).",
            401,
        )
    if not principal.may("ops"):
        log.warning("console login refused: key %r has scope %s", principal.name, principal.scope)
        return _login_page(
            request,
            c,
            next_url,
            f"The key {principal.name!r} has scope {principal.scope}: the console needs a key "
            "of scope ops.",
            403,
        )
    value, _ = c.sessions.issue(principal.name, first(form, "key").strip())
    log.info("console login: key %r", principal.name)
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(
        COOKIE,
        value,
        max_age=c.sessions.ttl_s,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )
    response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH)
    return response


@router.post("/logout")
def logout(request: Request, c: ConsoleDep, session: Checked) -> Response:
    c.sessions.end(session)
    log.info("console logout: key %r", session.name)
    response = RedirectResponse(PREFIX + "/login", status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


# -- overview --------------------------------------------------------------------------------
Window = Literal["1h", "6h", "24h", "7d", "all"]


@router.get("/")
def overview(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    window: Window = figures.DEFAULT_WINDOW,  # type: ignore[assignment]
) -> HTMLResponse:
    now = _now()
    since = figures.window_start(window, now)
    ov = figures.overview(c.backend.db, c.backend.settings, since, now)
    chart = charts.bars("sends", "Pushes sent per minute, last hour (UTC)", ov.sends_per_minute)
    return render(
        request,
        "overview.html",
        session=session,
        page="overview",
        window=window,
        windows=figures.WINDOW_LABELS,
        since=since,
        ov=ov,
        chart=chart,
        now=now,
    )


@router.get("/health")
def health(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    part: Part = False,
    fresh: Annotated[bool, Query()] = False,
) -> HTMLResponse:
    report = c.health.get(fresh=fresh)
    template = "health_part.html" if part else "health.html"
    return render(request, template, session=session, page="overview", report=report)


# -- upcoming --------------------------------------------------------------------------------
@router.get("/upcoming")
def upcoming(request: Request, c: ConsoleDep, session: Operator) -> HTMLResponse:
    now = _now()
    up = figures.upcoming(c.backend.db, c.backend.settings, now)
    chart = charts.stacked(
        "pending",
        "Pending messages by due hour, next 24 hours (UTC), stacked by category",
        up.hours,
        up.categories,
        up.counts,
    )
    return render(
        request, "upcoming.html", session=session, page="upcoming", up=up, chart=chart, now=now
    )


# -- problems and replays --------------------------------------------------------------------
ProblemStatus = Literal["is_missed", "failed"]
Text = Annotated[str, Query(max_length=200)]


def _filter(
    c: ConsoleDep, status: str, category: str, user: str, since: str, until: str
) -> tuple[figures.ProblemFilter, dict[str, str]]:
    """The problems filter from its fields, and a message per field that is refused."""
    errors: dict[str, str] = {}
    flt = figures.ProblemFilter(status=status, category=category.strip(), user=user.strip())
    if flt.status not in figures.PROBLEM_STATUSES:
        errors["status"] = f"status {shown(flt.status)}: choose is_missed or failed"
        flt.status = Status.IS_MISSED.value
    bad_category = flt.category and category_problem(flt.category, c.backend.settings.categories)
    if bad_category:
        errors["category"] = bad_category
    if flt.user:
        problem = id_problem(flt.user)
        if problem:
            errors["user"] = f"user id {shown(flt.user)} {problem}"
    for name, raw in (("since", since.strip()), ("until", until.strip())):
        if raw:
            try:
                setattr(flt, name, checks.instant(raw, name))
            except InputError as exc:
                errors[name] = str(exc)
    return flt, errors


@router.get("/problems")
def problems(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    status: ProblemStatus = "is_missed",
    category: Text = "",
    user: Text = "",
    since: Text = "",
    until: Text = "",
) -> HTMLResponse:
    flt, errors = _filter(c, status, category, user, since, until)
    found = None if errors else figures.problems(c.backend.db, flt)
    fields = {"status": status, "category": category, "user": user, "since": since, "until": until}
    return render(
        request,
        "problems.html",
        422 if errors else 200,
        session=session,
        page="problems",
        fields=fields,
        errors=errors,
        found=found,
        categories=list(c.backend.settings.categories),
        listed=figures.PROBLEMS_LISTED,
    )


def _selection(c: ConsoleDep, form: Form) -> tuple[Selection, dict[str, str], str]:
    """The replay's selection from a form: one message, the ticked ones, or all matching
    the filter. Also the filter's fields, to go back to the list, and what was chosen."""
    fields = {k: first(form, k) for k in ("status", "category", "user", "since", "until")}
    flt, errors = _filter(c, **{k: v or "" for k, v in fields.items()})
    if errors:
        raise ConsoleError(422, "Refused input", "; ".join(errors.values()))
    status = Status(flt.status)
    one = first(form, "one")
    scope = first(form, "scope", "all")
    if one:
        return Selection(ids=[one], status=status), fields, "one"
    if scope == "selected":
        ids = [i for i in form.get("ids", []) if i]
        if not ids:
            raise ConsoleError(
                422,
                "No message selected",
                "Tick the messages to replay in the list first, or replay all matching.",
            )
        return Selection(ids=ids, status=status), fields, "selected"
    return (
        Selection(
            since=flt.since,
            until=flt.until,
            categories=[flt.category] if flt.category else [],
            users=[flt.user] if flt.user else [],
            status=status,
        ),
        fields,
        "all",
    )


def _by(session: Operator) -> str:
    return f"console:{session.name}"


def _preview(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    form: Form,
    notice: str = "",
) -> HTMLResponse:
    sel, fields, chosen = _selection(c, form)
    docs = replays.selection_now(c.backend.db, sel, _by(session))
    return render(
        request,
        "preview.html",
        session=session,
        page="problems",
        fields=fields,
        chosen=chosen,
        ids=list(sel.ids),
        one=first(form, "one"),
        scope=first(form, "scope", "all"),
        docs=docs[: replays.SHOWN],
        count=len(docs),
        reason=first(form, "reason") or "replayed from the console",
        notice=notice,
    )


@router.post("/replays/preview")
def replay_preview(request: Request, c: ConsoleDep, session: Action, form: Form) -> HTMLResponse:
    """The dry run: what the replay would take now. Changes nothing."""
    return _preview(request, c, session, form)


@router.post("/replays")
def replay_start(request: Request, c: ConsoleDep, session: Action, form: Form) -> Response:
    """The confirmation: replay what the selection takes now, unless that is more than the
    dry run counted (then the dry run again, with the new count)."""
    sel, _, _ = _selection(c, form)
    reason = first(form, "reason").strip()[:500] or "replayed from the console"
    try:
        expected = int(first(form, "expected", "-1"))
    except ValueError:
        expected = -1
    docs = replays.selection_now(c.backend.db, sel, _by(session))
    if not docs:
        raise ConsoleError(
            409,
            "Nothing to replay any more",
            "None of the messages is still waiting for a replay (another replay or a fix took "
            "them). Go back to Problems to see where they are.",
        )
    if len(docs) > expected:
        return _preview(
            request,
            c,
            session,
            form,
            notice=f"The selection changed: {len(docs)} messages match now, the dry run counted "
            f"{max(expected, 0)}. Check and confirm again.",
        )
    run = c.runs.start(sel, docs, _by(session), reason)
    return RedirectResponse(f"{PREFIX}/replays/{run.run_id}", status_code=303)


@router.get("/replays/{run_id:path}")
def replay_watch(
    request: Request, c: ConsoleDep, session: Operator, run_id: str, part: Part = False
) -> HTMLResponse:
    if len(run_id) > 300:
        raise ConsoleError(404, "Not found", "no such replay")
    run = c.runs.get(run_id)
    prog = replays.progress(c.backend.db, run_id, run)
    if run is None and not prog.total:
        raise ConsoleError(404, "Not found", f"no replay {shown(run_id)}")
    done = run.done if run is not None else prog.in_flight == 0
    return render(
        request,
        "replay_part.html" if part else "replay.html",
        session=session,
        page="problems",
        run_id=run_id,
        run=run,
        prog=prog,
        done=done and prog.in_flight == 0,
    )


# -- a user, a message ----------------------------------------------------------------------
@router.get("/users")
def user_lookup(
    request: Request,
    session: Operator,
    id: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    wanted = id.strip()
    if wanted:
        problem = id_problem(wanted)
        if problem is None:
            # Quoted whole: an id may hold "?", "#" or "%", which would otherwise end the path.
            return RedirectResponse(f"{PREFIX}/users/{quote(wanted, safe='')}", status_code=303)
        return render(
            request,
            "users.html",
            422,
            session=session,
            page="users",
            wanted=wanted,
            error=f"user id {shown(wanted)} {problem}",
        )
    return render(request, "users.html", session=session, page="users", wanted="", error="")


@router.get("/users/{user_id}")
def user_page(request: Request, c: ConsoleDep, session: Operator, user_id: str) -> HTMLResponse:
    problem = id_problem(user_id)
    if problem:
        raise ConsoleError(422, "Refused input", f"user id {shown(user_id)} {problem}")
    now = _now()
    rec = records.user_record(c.backend.db, user_id, c.backend.settings.categories, now)
    if rec.user is None and not rec.messages and not rec.tokens:
        raise ConsoleError(404, "Not found", f"no user {shown(user_id)} and no message of theirs")
    return render(
        request, "user.html", session=session, page="users", user_id=user_id, rec=rec, now=now
    )


@router.get("/messages/{message_id:path}")
def message_page(
    request: Request, c: ConsoleDep, session: Operator, message_id: str
) -> HTMLResponse:
    if not message_id or len(message_id) > 512:
        raise ConsoleError(404, "Not found", "no such message")
    rec = records.message_record(c.backend.db, message_id)
    if rec is None:
        raise ConsoleError(404, "Not found", f"no message {shown(message_id)}")
    msg = rec.message
    status = msg.get("status")
    replayable = status == Status.IS_MISSED.value
    if status == Status.FAILED.value:
        replayable = figures.replayable_failed(c.backend.db, message_id)
    return render(
        request,
        "message.html",
        session=session,
        page="messages",
        rec=rec,
        msg=msg,
        replayable=replayable,
    )
