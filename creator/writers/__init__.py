"""Management's one write path: one writer per resource (users, logins, reminders, erasure),
used alike by a CLI command, a single API call and a batch item (a single call is a batch of
one: ``creator.writers.batch``). ``Writers`` holds them together over one database (or the
planner's stores: ``Where``), planner and settings."""

from __future__ import annotations

from creator.context import Where
from creator.planner import Planner
from creator.writers.base import Context
from creator.writers.erasure import ErasureWriter
from creator.writers.logins import LoginWriter
from creator.writers.reminders import ReminderWriter
from creator.writers.users import UserWriter
from creator.writers.versions import ReminderVersions
from shared.settings import Settings


class Writers(Context):
    """Every writer, sharing this context."""

    def __init__(self, where: Where, planner: Planner, settings: Settings) -> None:
        super().__init__(where, planner, settings)
        self.erasure = ErasureWriter(self)
        self.versions = ReminderVersions(self)
        self.users = UserWriter(self, self.versions)
        self.logins = LoginWriter(self, self.erasure)
        self.reminders = ReminderWriter(self, self.versions, self.erasure)


__all__ = ["Writers"]
