"""The console's plumbing: templates, the session and CSRF checks, HTML errors, headers.

- ``render`` fills a template (Jinja2, autoescaped) with what every page needs (the session,
  its CSRF token, read-only mode, the static files' URL) and the console's security headers:
  a Content-Security-Policy that allows only this origin's own script and style (nothing inline,
  nothing from elsewhere), no framing, no referrer (URLs carry user ids), no caching.
- ``Operator`` (a page) needs a valid session: without one a page redirects to the login form.
  ``Action`` (every POST but the login) also needs the session's CSRF token and, in read-only
  mode, is refused (403): the pages hide the actions, and the server refuses them too.
- ``ConsoleRoute`` answers the console's errors as HTML pages with their status (the API
  answers problem+json): not found, refused input, the database unreachable, a bug.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, select_autoescape
from pymongo.errors import ConnectionFailure
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.console.session import COOKIE, ConsoleSession, Sessions
from api.deps import Backend
from api.problems.model import ApiProblem
from shared.errors import InputError, NotFoundError, TransientError

log = logging.getLogger(__name__)

PREFIX = "/console"
STATIC_PATH = PREFIX + "/static"
STATIC_DIR = Path(__file__).parent / "static"
MAX_FORM_BYTES = 256 * 1024
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _fmt_time(value: Any, seconds: bool = True) -> str:
    if not isinstance(value, dt.datetime):
        return "—"
    value = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ" if seconds else "%Y-%m-%d %H:%MZ")


def _iso(value: Any) -> str:
    if not isinstance(value, dt.datetime):
        return ""
    value = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _ms(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "—"
    return f"{int(value):,} ms"


def _value(value: Any) -> str:
    return _fmt_time(value) if isinstance(value, dt.datetime) else str(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


_env = Environment(
    loader=PackageLoader("api.console", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters.update(
    utc=_fmt_time,
    iso=_iso,
    ms=_ms,
    val=_value,
    mapping=_mapping,
    q=lambda v: quote(str(v), safe=""),
)


@dataclass
class Console:
    """What the console keeps per process: the backend, its sessions (the store of them, in
    the database) and its caches."""

    backend: Backend
    sessions: Sessions
    health: Any  # api.console.health.HealthCache
    runs: Any  # api.console.replays.Runs

    @property
    def read_only(self) -> bool:
        return self.backend.settings.api.console_read_only


def console(request: Request) -> Console:
    c: Console = request.app.state.console
    return c


ConsoleDep = Annotated[Console, Depends(console)]


def render(
    request: Request,
    template: str,
    status: int = 200,
    session: ConsoleSession | None = None,
    **context: Any,
) -> HTMLResponse:
    c = console(request)
    html = _env.get_template(template).render(
        request=request,
        session=session,
        csrf=session.csrf if session else "",
        read_only=c.read_only,
        static=STATIC_PATH,
        prefix=PREFIX,
        **context,
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def form_page(
    request: Request, template: str, refused: object, session: ConsoleSession, **context: Any
) -> HTMLResponse:
    """A page with a filter or lookup form: 422 when its input was refused (``refused``: the
    errors it shows, truthy), else 200."""
    return render(request, template, 422 if refused else 200, session, **context)


class LoginRequired(Exception):
    """No valid session: a page redirects to the login form, an action is refused (401)."""


class ConsoleError(Exception):
    """A refusal shown as a page: ``status``, a title and what to do."""

    def __init__(self, status: int, title: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail = status, title, detail


def operator(request: Request, c: ConsoleDep) -> ConsoleSession:
    session = c.sessions.read(request.cookies.get(COOKIE))
    if session is None:
        raise LoginRequired()
    request.state.principal = session  # its name, for the access log; never a key
    return session


Operator = Annotated[ConsoleSession, Depends(operator)]


async def form_data(request: Request) -> dict[str, list[str]]:
    """The urlencoded body of a POST (at most ``MAX_FORM_BYTES``): name -> every value."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise ConsoleError(413, "Form too large", f"a form is at most {MAX_FORM_BYTES} bytes")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if body and kind != "application/x-www-form-urlencoded":
        raise ConsoleError(415, "Not a form", "the console takes HTML forms (urlencoded) only")
    out: dict[str, list[str]] = {}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ConsoleError(400, "Bad form", "the form is not UTF-8") from None
    for name, value in parse_qsl(text, keep_blank_values=True):
        out.setdefault(name, []).append(value)
    return out


Form = Annotated[dict[str, list[str]], Depends(form_data)]


def checked(request: Request, c: ConsoleDep, session: Operator, form: Form) -> ConsoleSession:
    """A POST of a logged-in operator that carries the session's CSRF token."""
    presented = first(form, "csrf") or request.headers.get("x-csrf-token")
    if not c.sessions.csrf_ok(session, presented):
        log.warning(
            "console: %s refused to %s (no valid CSRF token)", request.url.path, session.name
        )
        raise ConsoleError(
            403,
            "Refused: the form's security token is missing or wrong",
            "Reload the page and try again (the form may be from an earlier login).",
        )
    return session


Checked = Annotated[ConsoleSession, Depends(checked)]


def action(c: ConsoleDep, session: Checked) -> ConsoleSession:
    """A checked POST that changes something: refused in read-only mode."""
    if c.read_only:
        raise ConsoleError(
            403,
            "Refused: the console is read-only",
            "TZPUSH_API__CONSOLE_READ_ONLY is set: the console shows everything and changes "
            "nothing. Use `tzpush replay` or POST /v1/replays, or unset it.",
        )
    return session


Action = Annotated[ConsoleSession, Depends(action)]


def first(form: Mapping[str, list[str]], name: str, default: str = "") -> str:
    values = form.get(name) or [default]
    return values[0]


def login_redirect(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{PREFIX}/login?next={quote(target, safe='')}", status_code=303)


def safe_next(raw: str | None) -> str:
    """Where to go after logging in: a console path of this site, nothing else."""
    if raw and raw.startswith(PREFIX + "/") and not raw.startswith("//") and "\\" not in raw:
        return raw
    return PREFIX + "/"


class ConsoleRoute(APIRoute):
    """Errors of console routes as HTML pages (the API's are problem+json)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired:
                if request.method == "GET":
                    return login_redirect(request)
                return _error(
                    request,
                    401,
                    "Your session has ended",
                    "Log in again with an ops key; then repeat what you were doing.",
                )
            except ConsoleError as exc:
                return _error(request, exc.status, exc.title, exc.detail)
            except NotFoundError as exc:
                return _error(request, 404, "Not found", str(exc))
            except InputError as exc:
                return _error(request, 422, "Refused input", str(exc))
            except ApiProblem as exc:  # the API's own checks, as a cursor's (``api.pages``)
                named = "; ".join(f"{e['name']}: {e['message']}" for e in exc.errors)
                return _error(request, exc.status, "Refused input", named or exc.detail)
            except RequestValidationError as exc:
                bad = "; ".join(
                    f"{'.'.join(str(p) for p in e.get('loc', ())[1:])}: {e.get('msg')}"
                    for e in exc.errors()
                )
                return _error(request, 422, "Refused input", bad)
            except (TransientError, ConnectionFailure) as exc:
                log.warning("console %s: %s", request.url.path, exc)
                return _error(
                    request,
                    503,
                    "The database is unreachable",
                    "tzpush cannot read MongoDB right now; reload in a few seconds. "
                    "`tzpush doctor` says what is wrong.",
                )
            except StarletteHTTPException as exc:
                return _error(request, exc.status_code, "Error", str(exc.detail))
            except Exception:
                log.exception("unhandled error in console %s %s", request.method, self.path)
                return _error(
                    request,
                    500,
                    "Internal error",
                    "The console failed to build this page; the error is in the API's log.",
                )

        return route


def _error(request: Request, status: int, title: str, detail: str) -> HTMLResponse:
    # The session ``operator`` found, if it ran: no database read here (this runs in the event
    # loop, and the error may be that the database is unreachable).
    session = getattr(request.state, "principal", None)
    session = session if isinstance(session, ConsoleSession) else None
    return render(request, "error.html", status, session, title=title, detail=detail)
