"""Logging set-up for every entry point: JSON lines when not on a TTY, readable text on one.

Context (message, user, category) is passed with ``extra={"message_id": ..., "user_id": ...,
"category": ...}`` and appears as fields in JSON and as a suffix in text.
"""

from __future__ import annotations

import json
import logging
import sys

CONTEXT = ("message_id", "user_id", "category", "wakeup_id", "consumer")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in CONTEXT:
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        ctx = " ".join(f"{k}={getattr(record, k)}" for k in CONTEXT if hasattr(record, k))
        return f"{base} [{ctx}]" if ctx else base


def setup(level: str = "INFO", json_logs: bool | None = None) -> None:
    """Configure the root logger once (idempotent)."""
    use_json = (not sys.stderr.isatty()) if json_logs is None else json_logs
    handler = logging.StreamHandler(sys.stderr)
    if use_json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    handler.formatter.converter = __import__("time").gmtime  # type: ignore[union-attr]
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("stomp", "stomp.py", "urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
