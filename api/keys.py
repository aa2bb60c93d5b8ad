"""Bearer keys: stored as SHA-256 hashes, compared in constant time, each with a scope.

A key is a random string the operator hands to an app backend (``tzpush api --new-key NAME``
prints one, and the settings entry with its hash). Settings hold only the hash
(``TZPUSH_API__KEYS``), so neither a settings dump nor a leaked environment gives a usable key.
Each request's key is hashed once and compared with every configured hash with
``hmac.compare_digest`` (no early exit), so timing says nothing about which key came close.

Scopes: ``app`` may use users, devices, reminders and their messages; ``ops`` may do all of that
and also stats, replays and ``/metrics``. No key, or an unknown one: 401. A known key outside
its scope: 403. A key is never logged: only its name is, and only the name reaches replays.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from shared.settings import ApiKey

SCOPES = ("app", "ops")
GRANTS = {"app": frozenset({"app"}), "ops": frozenset({"app", "ops"})}
KEY_PREFIX = "tzp_"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the key's name and scope (never the key)."""

    name: str
    scope: str

    def may(self, needed: str) -> bool:
        return needed in GRANTS.get(self.scope, frozenset())


def hash_key(key: str) -> str:
    """Hex SHA-256 of a key, as ``TZPUSH_API__KEYS`` stores it."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    """A fresh random key (256 bits), prefixed so a leaked one is easy to recognise."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyRing:
    """The configured keys; ``identify`` maps a presented key to its ``Principal`` or None."""

    def __init__(self, keys: Sequence[ApiKey]) -> None:
        self._keys = [
            (bytes.fromhex(k.sha256.get_secret_value()), Principal(k.name, k.scope)) for k in keys
        ]

    def __len__(self) -> int:
        return len(self._keys)

    def identify(self, presented: str | None) -> Principal | None:
        if not presented:
            return None
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found = None
        for stored, principal in self._keys:  # every key is compared: no early exit
            if hmac.compare_digest(digest, stored):
                found = principal
        return found
