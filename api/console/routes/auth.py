"""Logging in to the console with an ops key, and out."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console.session import COOKIE, COOKIE_PATH, LOGIN_COOKIE, LOGIN_TTL_S
from api.console.web import (
    PREFIX,
    Checked,
    ConsoleDep,
    ConsoleRoute,
    Form,
    first,
    render,
    safe_next,
)

log = logging.getLogger(__name__)

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)


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


@router.get("/login")
def login_form(
    request: Request, c: ConsoleDep, next: Annotated[str, Query(max_length=2048)] = ""
) -> Response:
    """The login form; with a live session, straight on to ``next`` (a path of the console only)."""
    if c.sessions.read(request.cookies.get(COOKIE)) is not None:
        return RedirectResponse(safe_next(next), status_code=303)
    return _login_page(request, c, safe_next(next))


@router.post("/login")
def login(request: Request, c: ConsoleDep, form: Form) -> Response:
    """A session for an ops key given with the form's own token, then on to ``next``; otherwise the
    form again, saying why (401 unknown key, 403 stale form or a key of another scope)."""
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
    """Ends the session (its form token checked) and goes back to the login form."""
    c.sessions.end(session)
    log.info("console logout: key %r", session.name)
    response = RedirectResponse(PREFIX + "/login", status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response
