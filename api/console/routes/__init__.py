"""The console's pages and actions under ``/console`` (not in the OpenAPI document).

Pages (GET, a session needed): the overview, its health checks, upcoming, problems, a replay
being watched, the users list, a user, a message. Actions (POST, a session and its CSRF token
needed, refused in read-only mode): a replay's dry run and its confirmation. Logging in and
out are POSTs too, each with its own token. Every page works without script;
``static/console.js`` only loads the health checks after the page and refreshes a replay until
its messages have ended.

``auth`` logs in and out, ``pages`` shows, ``replays`` previews, starts and watches replays,
``forms`` reads what the pages and actions are given; ``router`` holds every route.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.console.routes import auth, pages, replays

router = APIRouter()
router.include_router(auth.router)
router.include_router(pages.router)
router.include_router(replays.router)
