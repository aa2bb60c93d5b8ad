"""The project's small error tree: each adapter translates its driver's exceptions into these.

The branches are exactly "retry" versus "don't": a ``TransientError`` may succeed if tried again
(network, broker or database briefly away, HTTP 429/5xx), a ``PermanentError`` will not.
``InputError`` is bad input refused where it enters, with a message that says what to fix.
"""

from __future__ import annotations


class TzpushError(Exception):
    """Base of every error tzpush raises on purpose."""


class TransientError(TzpushError):
    """Try again later (with back-off)."""


class Overloaded(TransientError):
    """Too much already waiting: refused at once, nothing done; try again shortly. Its message
    is meant for the caller (the API's 503 shows it), unlike a driver's failure."""


class PermanentError(TzpushError):
    """Trying again will not help."""


class InputError(PermanentError, ValueError):
    """Bad input (time zone, token, payload, time of day...): the message names the value."""


class NotFoundError(PermanentError, LookupError):
    """A named user, reminder, token or message does not exist."""


class ConflictError(PermanentError):
    """The change collides with what another owner holds (a reminder id another user uses)."""
