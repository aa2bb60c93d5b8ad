"""What the acknowledged changes make of a user, a reminder or an install at an instant.

`settled` answers the state only when the history leaves no doubt: every change that started by
then was answered (2xx or 4xx) at least ``window`` before it, and changes whose request times
overlap (whose order the history cannot tell) lead to the same state in every order. Otherwise
it answers `AMBIGUOUS`, and the checker judges nothing that depends on it.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

from chaoscheck.history import Change, History

State = dict[str, Any]
Fold = Callable[[State, Change], State]
AMBIGUOUS: State = {"ambiguous": True}
_MAX_CONCURRENT = 4
_CONTENT = ("category", "label", "at", "offsetMinutes", "weekdays", "active")


def settled(changes: Iterable[Change], t: float, window: float, fold: Fold, init: State) -> State:
    """The state at ``t`` after the changes answered by ``t - window``; or AMBIGUOUS."""
    relevant = [c for c in changes if c.outcome != "refused" and c.start <= t]
    if any(c.outcome == "unknown" or c.end > t - window for c in relevant):
        return AMBIGUOUS
    relevant.sort(key=lambda c: c.end)
    clusters: list[list[Change]] = []
    for c in relevant:
        if clusters and c.start < max(x.end for x in clusters[-1]):
            clusters[-1].append(c)
        else:
            clusters.append([c])
    states = {_key(init): init}
    for cluster in clusters:
        if len(cluster) > _MAX_CONCURRENT:
            return AMBIGUOUS
        nxt: dict[str, State] = {}
        for s in states.values():
            for order in itertools.permutations(cluster):
                out = s
                for c in order:
                    out = fold(out, c)
                nxt[_key(out)] = out
        states = nxt
    if len(states) != 1:
        return AMBIGUOUS
    return next(iter(states.values()))


def _key(state: State) -> str:
    return json.dumps(state, sort_keys=True, default=str)


def user_fold(state: State, c: Change) -> State:
    if c.kind == "erase":
        return {"exists": False}
    b = c.body
    return {
        "exists": True,
        "tz": b.get("timezone"),
        "enabled": b.get("enabled", True) is not False,
        "categories": dict(b.get("categories") or {}),
    }


def reminder_fold(state: State, c: Change) -> State:
    if c.kind in ("remove", "erase"):
        return {"exists": False}
    if c.kind == "reminder":
        out = {k: c.body.get(k) for k in _CONTENT}
        out["active"] = c.body.get("active", True) is not False
        out["offsetMinutes"] = int(c.body.get("offsetMinutes") or 0)
        out["rev"] = (c.body.get("data") or {}).get("rev")
        return {"exists": True, **out}
    if not state.get("exists"):
        return state  # a PATCH of what is not there is a 404
    out = dict(state)
    out.update({k: c.body[k] for k in _CONTENT if k in c.body})
    if "data" in c.body:
        out["rev"] = (c.body.get("data") or {}).get("rev")
    return out


def install_fold(token: str, devices: set[str]) -> Fold:
    """Who holds the install ``token`` (``holder``: [user, device]) after a change."""

    def fold(state: State, c: Change) -> State:
        holder = state.get("holder")
        if c.kind == "login":
            if c.token == token:
                return {"holder": [c.user, c.key]}
            if holder and c.key == holder[1]:
                return {"holder": None}  # the device logged in with another token
            return state
        if c.kind == "logout" and holder == [c.user, c.key]:
            return {"holder": None}
        if c.kind == "erase" and holder and holder[0] == c.user:
            return {"holder": None}
        return state

    return fold


class Intent:
    """The history's changes indexed for the questions the invariants ask."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.owner: dict[str, str] = {}
        self.revs: dict[Any, Change] = {}
        self.tokens_of: dict[str, set[str]] = {}
        self.devices_of_token: dict[str, set[str]] = {}
        for c in history.changes:
            if c.kind in ("reminder", "patch", "remove"):
                self.owner.setdefault(c.key, c.user)
            if c.kind in ("reminder", "patch") and "data" in c.body:
                rev = (c.body.get("data") or {}).get("rev")
                if rev is not None and c.outcome != "refused":
                    self.revs.setdefault(rev, c)
            if c.kind == "login" and c.token:
                self.tokens_of.setdefault(c.user, set()).add(c.token)
                self.devices_of_token.setdefault(c.token, set()).add(c.key)

    @functools.cache  # noqa: B019 - one Intent per run, kept for the run's whole check
    def _of_user(self, uid: str) -> list[Change]:
        return [c for c in self.history.changes if c.user == uid]

    @functools.cache  # noqa: B019
    def _of_reminder(self, rid: str) -> list[Change]:
        uid = self.owner.get(rid, "")
        return [
            c
            for c in self.history.changes
            if (c.key == rid and c.kind in ("reminder", "patch", "remove"))
            or (c.kind == "erase" and c.user == uid)
        ]

    @functools.cache  # noqa: B019
    def _of_install(self, token: str) -> list[Change]:
        devices = self.devices_of_token.get(token, set())
        holders = {c.user for c in self.history.changes if c.kind == "login" and c.token == token}
        return [
            c
            for c in self.history.changes
            if (c.kind == "login" and (c.token == token or c.key in devices))
            or (c.kind == "logout" and c.key in devices)
            or (c.kind == "erase" and c.user in holders)
        ]

    def user(self, uid: str, t: float, window: float) -> State:
        changes = [c for c in self._of_user(uid) if c.kind in ("user", "erase")]
        return settled(changes, t, window, user_fold, {})

    def reminder(self, rid: str, t: float, window: float) -> State:
        return settled(self._of_reminder(rid), t, window, reminder_fold, {"exists": False})

    def install(self, token: str, t: float, window: float) -> State:
        fold = install_fold(token, self.devices_of_token.get(token, set()))
        return settled(self._of_install(token), t, window, fold, {"holder": None})

    def zones(self, uid: str, before: float) -> list[str]:
        """Every zone a change of the user asked for, started by ``before``."""
        out: list[str] = []
        for c in self.history.of("user", user=uid):
            tz = c.body.get("timezone")
            if c.outcome != "refused" and c.start <= before and tz and tz not in out:
                out.append(tz)
        return out

    def content(self, rev: Any) -> State | None:
        """The rule a push names by its ``rev`` (the change that carried it), or None."""
        c = self.revs.get(rev)
        if c is None:
            return None
        body = c.body
        return {
            "category": body.get("category"),
            "at": body.get("at"),
            "offsetMinutes": int(body.get("offsetMinutes") or 0),
            "weekdays": body.get("weekdays"),
        }
