"""The console's pages: the overview and its health checks, upcoming, problems, the users list,
a user, a message."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api import pages
from api.console import charts, figures, records, userlist
from api.console.routes.forms import Part, ProblemStatus, Text, problem_filter
from api.console.web import (
    PREFIX,
    ConsoleDep,
    ConsoleError,
    ConsoleRoute,
    Operator,
    form_page,
    render,
)
from shared.domain.messages import Status
from shared.domain.validation import id_problem, shown

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@router.get("")
def root() -> RedirectResponse:
    """``/console`` goes to ``/console/``."""
    return RedirectResponse(PREFIX + "/", status_code=307)


# -- overview --------------------------------------------------------------------------------
Window = Literal["1h", "6h", "24h", "7d", "all"]


@router.get("/")
def overview(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    window: Window = figures.DEFAULT_WINDOW,  # type: ignore[assignment]
) -> HTMLResponse:
    """Counts by status and category since the window's start, sends per minute, live consumers."""
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
    """Doctor's checks (cached; ``fresh`` runs them anew); ``part``: only what refreshes."""
    report = c.health.get(fresh=fresh)
    template = "health_part.html" if part else "health.html"
    return render(request, template, session=session, page="overview", report=report)


# -- upcoming --------------------------------------------------------------------------------
@router.get("/upcoming")
def upcoming(request: Request, c: ConsoleDep, session: Operator) -> HTMLResponse:
    """Pending messages by due hour for the next 24 hours, and their wake-ups."""
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
    """is_missed or failed messages matching the filter, by reason; 422 naming refused fields."""
    flt, errors = problem_filter(c, status, category, user, since, until)
    found = None if errors else figures.problems(c.backend.db, flt)
    fields = {"status": status, "category": category, "user": user, "since": since, "until": until}
    return form_page(
        request,
        "problems.html",
        errors,
        session,
        page="problems",
        fields=fields,
        errors=errors,
        found=found,
        categories=list(c.backend.settings.categories),
        listed=figures.PROBLEMS_LISTED,
    )


# -- a user, a message ----------------------------------------------------------------------
@router.get("/users")
def users(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    id: Annotated[str, Query(max_length=200)] = "",
    q: Text = "",
    after: Annotated[str | None, Query(max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=pages.MAX_LIMIT)] = pages.DEFAULT_LIMIT,
) -> Response:
    """Users in id order, a page at a time, those whose id starts with ``q`` if given; ``id``
    (the lookup form) goes on to that user's page. 422 for an invalid id, limit or cursor."""
    wanted = id.strip()
    error = ""
    if wanted:
        error = id_problem(wanted) or ""
        if not error:
            # Quoted whole: an id may hold "?", "#" or "%", which would otherwise end the path.
            return RedirectResponse(f"{PREFIX}/users/{quote(wanted, safe='')}", status_code=303)
        error = f"user id {shown(wanted)} {error}"
    found = userlist.user_page(c.backend.db, q, after, limit)
    params = {"q": q or None, "limit": limit if limit != pages.DEFAULT_LIMIT else None}
    return form_page(
        request,
        "users.html",
        error,
        session,
        page="users",
        wanted=wanted,
        error=error,
        q=q,
        found=found,
        next=pages.next_link(request, params, found.cursor),
        paged=after is not None,
    )


@router.get("/users/{user_id}")
def user_page(request: Request, c: ConsoleDep, session: Operator, user_id: str) -> HTMLResponse:
    """A user with their tokens and messages; 422 for an invalid id, 404 if neither the user nor a
    message of theirs exists."""
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
    """One message, its guard and token, and whether it can be replayed; 404 if there is none."""
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
