"""The console's replay actions: the dry run, the confirmation, and the page that watches a
replay until its messages have ended."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.console import replays
from api.console.routes.forms import Part, replay_selection, replayed_by
from api.console.web import (
    PREFIX,
    Action,
    ConsoleDep,
    ConsoleError,
    ConsoleRoute,
    Form,
    Operator,
    first,
    render,
)
from shared.domain.validation import shown

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)


def _preview(
    request: Request,
    c: ConsoleDep,
    session: Operator,
    form: Form,
    notice: str = "",
) -> HTMLResponse:
    sel, fields, chosen = replay_selection(c, form)
    docs = replays.selection_now(c.backend.db, sel, replayed_by(session))
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
    sel, _, _ = replay_selection(c, form)
    reason = first(form, "reason").strip()[:500] or "replayed from the console"
    try:
        expected = int(first(form, "expected", "-1"))
    except ValueError:
        expected = -1
    docs = replays.selection_now(c.backend.db, sel, replayed_by(session))
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
    run = c.runs.start(sel, docs, replayed_by(session), reason)
    return RedirectResponse(f"{PREFIX}/replays/{run.run_id}", status_code=303)


@router.get("/replays/{run_id:path}")
def replay_watch(
    request: Request, c: ConsoleDep, session: Operator, run_id: str, part: Part = False
) -> HTMLResponse:
    """A replay's progress until its messages have ended; 404 for a replay nobody knows."""
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
