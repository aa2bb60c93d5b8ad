"""Console logins: sessions kept in the database, their CSRF tokens, and the login form's token.

An operator logs in once with an ``ops`` key (the API's bearer keys, ``api.keys``); the console
then knows them by a cookie, never by the key, which is neither stored nor logged. The cookie
carries only a random session id (256 bits); the session itself is a record of the console's
sessions (``shared.store.abc_web.SessionRecords``), shared by every API process, so any of them
serves any request of a session (several tasks behind a load balancer need no sticky sessions).
The record:
``_id`` the SHA-256 of the cookie's id (a copy of the database holds no usable cookie),
``keyName``, ``keyId`` (which configured key logged in: a digest of its stored hash), ``csrf``,
``createdAt`` and ``expiresAt`` (after ``TZPUSH_API__CONSOLE_SESSION_HOURS``; checked at each
read, and the store removes it: a TTL index on MongoDB). A session ends:

- at "Log out": the record is deleted, so every process refuses the cookie at once, whoever
  holds a copy of it;
- when its time is up;
- when its key is gone: each request checks that the key it logged in with is still configured
  (the same name, the same hash) with scope ``ops`` in the answering process's settings.

Every action (a POST) must carry the session's CSRF token (a hidden form field ``csrf``, or the
header ``X-CSRF-Token``), a random value stored with the session: a page of another site cannot
read it, and the cookie is ``SameSite=Strict`` besides. The login form (no session yet) is
protected by a double submit: a random value in a short-lived cookie of its own, echoed in the
form, which a page of another site can neither read nor set. Nothing is signed, so the processes
share no secret.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from api.keys import GRANTS, hash_key
from shared.settings import ApiKey
from shared.store.abc_web import SessionRecords

COOKIE = "tzpush_console"
LOGIN_COOKIE = "tzpush_console_login"
COOKIE_PATH = "/console"
LOGIN_TTL_S = 3600  # a login form is good for an hour
MAX_COOKIE = 1024  # longer values are refused unread
_SID = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)


def _digest(sid: str) -> str:
    return hashlib.sha256(sid.encode("ascii")).hexdigest()


def _key_id(stored_sha256: str) -> str:
    """Which configured key: a digest of its stored hash (itself a hash of the key)."""
    return hashlib.sha256(b"tzpush-console-key:" + stored_sha256.lower().encode()).hexdigest()


def _same(a: str, b: str) -> bool:
    """Constant-time equality of two strings of any characters."""
    return hmac.compare_digest(
        a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
    )


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A logged-in operator: the session (its stored id, never the cookie), the key's name
    (never the key), when it ends, its CSRF token."""

    sid: str
    name: str
    expires: int  # epoch seconds
    csrf: str


class Sessions:
    """Issues, reads and ends sessions in ``records()`` for the ``ops`` keys of ``keys``.
    ``records`` is called at each use (the backend's database, opened later)."""

    def __init__(
        self,
        records: Callable[[], SessionRecords],
        keys: Sequence[ApiKey],
        hours: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s = max(1, int(hours * 3600))
        self._records = records
        self._clock = clock
        self._ops = {
            _key_id(k.sha256.get_secret_value()): k.name
            for k in keys
            if "ops" in GRANTS.get(k.scope, frozenset())
        }

    def _now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self._clock(), dt.UTC)

    def issue(self, name: str, key: str) -> tuple[str, ConsoleSession]:
        """A new session for ``key`` (already identified as the key named ``name``): (cookie
        value, session). Only the session's digest and the key's are stored."""
        sid = secrets.token_urlsafe(32)
        now = self._now().replace(microsecond=0)
        expires = now + dt.timedelta(seconds=self.ttl_s)
        session = ConsoleSession(
            _digest(sid), name, int(expires.timestamp()), secrets.token_urlsafe(32)
        )
        self._records().add(
            {
                "_id": session.sid,
                "keyName": name,
                "keyId": _key_id(hash_key(key)),
                "csrf": session.csrf,
                "createdAt": now,
                "expiresAt": expires,
            }
        )
        return sid, session

    def read(self, value: str | None) -> ConsoleSession | None:
        """The session a cookie names, or None: absent, unknown, expired, logged out, or its
        key no longer configured with scope ops."""
        if not value or not _SID.fullmatch(value):
            return None
        doc = self._records().get(_digest(value))
        if doc is None:
            return None
        expires = doc.get("expiresAt")
        if not isinstance(expires, dt.datetime):
            return None
        expires = expires if expires.tzinfo else expires.replace(tzinfo=dt.UTC)
        if expires <= self._now():
            return None
        name, csrf = doc.get("keyName"), doc.get("csrf")
        if not isinstance(name, str) or not isinstance(csrf, str):
            return None
        if self._ops.get(str(doc.get("keyId"))) != name:
            return None
        return ConsoleSession(str(doc["_id"]), name, int(expires.timestamp()), csrf)

    def end(self, session: ConsoleSession) -> None:
        """Log out: the session is deleted, and its cookie refused by every process from now."""
        self._records().delete(session.sid)

    def csrf_ok(self, session: ConsoleSession, presented: str | None) -> bool:
        return bool(presented) and _same(session.csrf, str(presented))

    # -- the login form's own token (double submit) --------------------------------------------
    def login_nonce(self) -> str:
        """A random value for the login form's cookie, stamped with when it ends."""
        return f"{secrets.token_urlsafe(32)}~{int(self._clock()) + LOGIN_TTL_S}"

    def login_token(self, nonce: str) -> str:
        """What the login form carries: its cookie's value (a double submit)."""
        return nonce

    def login_ok(self, nonce: str | None, presented: str | None) -> bool:
        """The login form's token matches its cookie, and the form is not older than an hour."""
        if not nonce or not presented or len(nonce) > MAX_COOKIE or "~" not in nonce:
            return False
        try:
            until = int(nonce.rsplit("~", 1)[1])
        except ValueError:
            return False
        now = self._clock()
        fresh = now < until <= now + LOGIN_TTL_S
        return fresh and _same(self.login_token(nonce), presented)
