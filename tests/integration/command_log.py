"""The database commands a piece of code sends, as the driver starts them: one listener for the
whole test process (pymongo's listeners are global), recording only while a test asks it to."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pymongo import monitoring

Command = tuple[str, dict[str, Any]]  # the command's name, its body


class _CommandLog(monitoring.CommandListener):
    def __init__(self) -> None:
        self.recording = False
        self.sent: list[Command] = []
        self.lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.recording:
            with self.lock:
                self.sent.append((event.command_name, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


_LOG = _CommandLog()
monitoring.register(_LOG)


def commands_of(action: Callable[[], Any]) -> list[Command]:
    """Every command sent (by any client of this process) while ``action`` ran."""
    with _LOG.lock:
        _LOG.sent.clear()
    _LOG.recording = True
    try:
        action()
    finally:
        _LOG.recording = False
    with _LOG.lock:
        return list(_LOG.sent)
