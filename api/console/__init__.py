"""The operator's console: web pages under ``/console`` served by ``tzpush api`` itself.

What ops look at (the overview, upcoming sends, problems, the users, a user, a message) and
do (replay missed or failed messages and watch them end), for keys of scope ``ops``, with a
login that sets a session cookie (``session``), CSRF tokens on every action and a read-only
mode (``TZPUSH_API__CONSOLE_READ_ONLY``). Server-rendered (Jinja2 templates in ``templates/``);
``static/`` holds the stylesheet and a small script, served from the package: no CDN, so the
console works with no network beyond the API. docs/console.md says what each page shows.

The figures and actions are the project's own code, as the API's: ``ops.stats`` (the counts of
``GET /v1/stats``), ``ops.doctor`` (health), ``ops.replay`` (replays), ``shared.store.fleet``
(live consumers) and ``api.views`` (users and reminders as the API shows them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from api.deps import Backend


def install(app: FastAPI, backend: Backend) -> None:
    """Add the console's routes and static files to ``app``, with its per-process state."""
    from fastapi.staticfiles import StaticFiles

    from api.console import routes
    from api.console.health import HealthCache
    from api.console.replays import Runs
    from api.console.session import Sessions
    from api.console.web import STATIC_DIR, STATIC_PATH, Console
    from shared.store.mongo.web import MongoSessions

    settings = backend.settings
    app.state.console = Console(
        backend=backend,
        sessions=Sessions(
            lambda: MongoSessions(backend.db),
            settings.api.keys,
            settings.api.console_session_hours,
        ),
        health=HealthCache(settings),
        runs=Runs(backend),
    )
    app.include_router(routes.router)
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC_DIR), name="console-static")
