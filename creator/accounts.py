"""A user's devices and the user as a whole: a logout, and erasure (``creator.writers``).

Used by ``tzpush tokens logout``, ``tzpush users erase`` and the HTTP API (``DELETE
/v1/users/{userId}/devices/{deviceId}``, ``DELETE /v1/users/{userId}``).
"""

from __future__ import annotations

from creator.writers import Writers
from creator.writers.erasure import ERASED, Erased


def logout(w: Writers, user_id: str, device_id: str) -> int:
    """``LoginWriter.logout``."""
    return w.logins.logout(user_id, device_id)


def erase_user(w: Writers, user_id: str) -> Erased:
    """``ErasureWriter.erase``."""
    return w.erasure.erase(user_id)


__all__ = ["ERASED", "Erased", "erase_user", "logout"]
