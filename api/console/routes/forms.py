"""What the console's pages and actions read from a request: the problems filter, a replay's
selection, who an action is done by."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from api import checks
from api.console import figures
from api.console.web import ConsoleDep, ConsoleError, Form, Operator, first
from ops.replay import Selection
from shared.domain.messages import Status
from shared.domain.validation import category_problem, id_problem, shown
from shared.errors import InputError

Part = Annotated[bool, Query(description="only the part of the page that refreshes")]
ProblemStatus = Literal["is_missed", "failed"]
Text = Annotated[str, Query(max_length=200)]


def problem_filter(
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


def replay_selection(c: ConsoleDep, form: Form) -> tuple[Selection, dict[str, str], str]:
    """The replay's selection from a form: one message, the ticked ones, or all matching
    the filter. Also the filter's fields, to go back to the list, and what was chosen."""
    fields = {k: first(form, k) for k in ("status", "category", "user", "since", "until")}
    flt, errors = problem_filter(c, **{k: v or "" for k, v in fields.items()})
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


def replayed_by(session: Operator) -> str:
    """Who a replay started from the console is recorded as done by."""
    return f"console:{session.name}"
