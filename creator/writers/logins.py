"""The one writer of logins: the one active registration of a device id and of a token string,
for one login or many at once; a logout; unregistering a device or token.

An Expo token belongs to an app install: any other active registration of the device or of the
token string (another user on the same install, the same install under another device id) is
deactivated, "token replaced", and its user stamped in the change log (``tokens.stamped``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from creator.writers import base
from creator.writers.base import UNREAD, Batch, Context, Done
from creator.writers.erasure import ErasureWriter
from shared.domain.backoff import compute_backoff
from shared.domain.messages import Doc
from shared.domain.validation import validate_expo_token, validate_id
from shared.errors import InputError, TransientError
from shared.store import erasure, tokens

REPLACED = f"{tokens.TOKEN_REPLACED} by a new login on the install"


@dataclass(frozen=True)
class Login:
    user_id: str
    device: str
    token: str


class LoginWriter:
    """Device registrations: logins, logouts, unregistering."""

    def __init__(self, ctx: Context, erased: ErasureWriter) -> None:
        self.ctx = ctx
        self.erased = erased

    def register(
        self, user_id: str, *, device: str, token: str, max_attempts: int = 8, born: Any = UNREAD
    ) -> Doc:
        """A login: the one active registration of this device id and of this token string.

        Concurrent logins race on the partial unique indexes; the loser retries with
        exponential back-off and jitter until exactly one active registration remains.
        ``born``: the user's ``createdAt`` as the caller read it first (a batch); another user
        found under the id now (erased and created again since) is a 404."""
        ctx = self.ctx
        token = validate_expo_token(token)
        validate_id(device, "device id")
        validate_id(user_id, "user id")
        user = ctx.get_user(user_id)
        base.check_same_user(user, born)
        regs, changes = ctx.stores.registrations, ctx.stores.changes
        rng = random.Random()
        for attempt in range(max_attempts):
            now = ctx.now
            current = regs.active_for(device, token)
            mine = [t for t in current if tokens.same_login(t, user_id, device, token)]
            others = [t["_id"] for t in current if t not in mine]
            if others:
                tokens.stamped(changes, regs.deactivate(others, REPLACED, now), now)
            if mine:
                # Planned again (idempotent): a login an outage cut before its planning is sent
                # again by the backend, and this is its only chance before the next window.
                ctx.planner.plan_users([user_id], tokens=[mine[0]["_id"]])
                return mine[0]
            doc = tokens.new_registration(user_id, device, token, now)
            if not regs.insert(doc):
                time.sleep(compute_backoff(attempt + 1, base=0.05, cap=1.0, rng=rng))
                continue
            changes.record([user_id], now)
            report = ctx.planner.plan_users([user_id], tokens=[doc["_id"]])
            if self.erased.undo_if_erased(
                report,
                read=erasure.incarnations_of({user_id: user}),
                registrations={user_id: [doc["_id"]]},
            ):
                raise base.erased_meanwhile(user_id)
            return doc
        raise TransientError(
            f"could not register a token for device {device!r} after {max_attempts} attempts "
            "(concurrent logins kept winning); try again"
        )

    def login(self, it: Login, born: Any = UNREAD) -> Done:
        """``register`` for a batch item."""
        doc = self.register(it.user_id, device=it.device, token=it.token, born=born)
        return Done(doc, "created")

    def unregister(self, *, token: str | None = None, device: str | None = None) -> int:
        """Deactivate every registration of this token string or device id; how many."""
        held = token.strip() if token else None
        device = validate_id(device, "device id") if device else None
        if held is None and device is None:
            raise InputError("give --token or --device")
        now = self.ctx.now
        off = self.ctx.stores.registrations.deactivate_holding(
            "unregistered", now, token=held, device=device
        )
        return len(tokens.stamped(self.ctx.stores.changes, off, now))

    def logout(self, user_id: str, device_id: str) -> int:
        """Deactivate this user's registration of the device (if it still has one): only
        theirs, so a late logout of a previous user never logs out whoever holds it now."""
        self.ctx.get_user(user_id)
        validate_id(device_id, "device id")
        now = self.ctx.now
        off = self.ctx.stores.registrations.deactivate_login(
            user_id, device_id, "unregistered (logout)", now
        )
        return len(tokens.stamped(self.ctx.stores.changes, off, now))

    def of_user(self, user_id: str) -> list[Doc]:
        """The user's registrations, active or not, oldest first."""
        return self.ctx.stores.registrations.of_user(validate_id(user_id, "user id"))

    # -- many ------------------------------------------------------------------------------
    def register_many(self, items: Iterable[tuple[int, Login]], batch: Batch) -> None:
        """A batch's logins. Inserted first: a new install (the usual login) is refused by
        neither unique index and needs no lookup. Only the logins refused look up what holds
        their device or token string: the same login sent again, or one replacing another."""
        todo = batch.checked(items, _checked_token)
        if not todo:
            return
        now = self.ctx.now
        first = [
            (i, it, tokens.new_registration(it.user_id, it.device, t, now)) for i, it, t in todo
        ]
        refused = self._insert_many(first, batch)
        if refused:
            self._replace_many([(i, it, d["token"]) for i, it, d in refused], batch)

    def _insert_many(
        self, new: list[tuple[int, Login, Doc]], batch: Batch
    ) -> list[tuple[int, Login, Doc]]:
        """Insert the logins' new registrations (unordered): each stored is answered "created"
        and its user planned; returns those the database refused."""
        if not new:
            return []
        lost = self.ctx.stores.registrations.insert_many([doc for _, _, doc in new])
        for k, (i, it, doc) in enumerate(new):
            if k not in lost:
                batch.out[i] = Done(doc, "created")
                batch.to_plan.add(it.user_id)
        return [row for k, row in enumerate(new) if k in lost]

    def _replace_many(self, todo: list[tuple[int, Login, str]], batch: Batch) -> None:
        """Logins whose device id or token string an active registration holds: the same login
        sent again (found, planned again), or one replacing the registration that holds it."""
        regs = self.ctx.stores.registrations
        current = regs.active_holding({it.device for _, it, _ in todo}, {t for _, _, t in todo})
        now = self.ctx.now
        replaced: list[str] = []
        new: list[tuple[int, Login, Doc]] = []
        for i, it, token in todo:
            near = [d for d in current if tokens.holds(d, it.device, token)]
            mine = [d for d in near if tokens.same_login(d, it.user_id, it.device, token)]
            replaced += [d["_id"] for d in near if d not in mine]
            if mine:
                batch.out[i] = Done(mine[0], "unchanged")
            else:
                new.append((i, it, tokens.new_registration(it.user_id, it.device, token, now)))
        if replaced:
            off = regs.deactivate(sorted(set(replaced)), REPLACED, now)
            tokens.stamped(self.ctx.stores.changes, off, now)
        # Refused again (a concurrent login took them): the single call, after the new users
        # are in (it needs its user).
        for i, it, _ in self._insert_many(new, batch):
            batch.later.append((i, self.login, (it,)))


def _checked_token(it: Login) -> str:
    """The login's token string as stored, its device and user ids checked."""
    token = validate_expo_token(it.token)
    validate_id(it.device, "device id")
    validate_id(it.user_id, "user id")
    return token
