"""A local fake of Expo's push HTTP API, served over real HTTP, for tests, benches and demos.

It speaks the wire format in ``docs/notes/expo.md`` closely enough that exponent-server-sdk's own
``PushClient`` (and our ``ExpoSender``) cannot tell it from Expo, and it adds what Expo cannot
give: a record of every accepted push with its arrival time, counters, and faults on demand.

`FakeExpo` is what tests, the bench and the demo hold: the fault settings changed at run time,
the recorded pushes and counters, and starting and stopping the server. The API's own rules (and
the list of behaviour chosen where Expo leaves room) are in `devstack.fake_expo_api`, the HTTP
server and routes in `devstack.fake_expo_http`, the ``tzpush fake-expo`` command in
`devstack.cli`: each is a job of its own, and this module is the one callers import.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from devstack.fake_expo_api import FakeExpoApi
from devstack.fake_expo_http import FakeExpoHandler, FakeExpoServer

_CONFIG_KEYS = (
    "rate_per_second",
    "error_rate",
    "latency_ms",
    "receipt_delay_s",
    "dead_at_ticket",
    "dead_at_receipt",
    "ticket_errors",
    "receipt_errors",
    "projects",
    "access_token",
    "hang_after_accept_s",
)


_API_ARGS = (
    *("access_token", "rate_per_second", "receipt_delay_s", "error_rate", "latency_ms"),
    *("dead_at_ticket", "dead_at_receipt", "ticket_errors", "seed", "max_records"),
    *("receipt_errors", "projects"),
)


class FakeExpo(FakeExpoApi):
    """The fake's state and logic; ``start()`` serves it over HTTP on a background thread.

    Faults are plain attributes (``error_rate``, ``latency_ms``, ``receipt_delay_s``,
    ``dead_at_ticket``, ``dead_at_receipt``, ``ticket_errors``, ``receipt_errors``,
    ``projects``, ``access_token``) plus the ``rate_per_second`` property;
    ``configure(**changes)`` sets several at once, as ``POST /_fake/config`` does.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        access_token: str | None = None,
        rate_per_second: float = 600.0,
        receipt_delay_s: float = 1.0,
        error_rate: float = 0.0,
        latency_ms: float = 0.0,
        dead_at_ticket: Iterable[str] = (),
        dead_at_receipt: Iterable[str] = (),
        ticket_errors: dict[str, list[str]] | None = None,
        receipt_errors: dict[str, list[str]] | None = None,
        projects: dict[str, str] | None = None,
        seed: int | None = None,
        max_records: int = 200_000,
        verbose: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        api_settings = {k: v for k, v in locals().items() if k in _API_ARGS}
        super().__init__(**api_settings)
        self.verbose = verbose
        self._server: FakeExpoServer | None = None
        self._thread: threading.Thread | None = None

    # -- configuration -----------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "rate_per_second": self.rate_per_second,
            "error_rate": self.error_rate,
            "latency_ms": self.latency_ms,
            "receipt_delay_s": self.receipt_delay_s,
            "dead_at_ticket": sorted(self.dead_at_ticket),
            "dead_at_receipt": sorted(self.dead_at_receipt),
            "ticket_errors": {k: list(v) for k, v in self.ticket_errors.items()},
            "receipt_errors": {k: list(v) for k, v in self.receipt_errors.items()},
            "projects": dict(self.projects),
            "access_token_set": self.access_token is not None,
            "hang_after_accept_s": self.hang_after_accept_s,
        }

    def configure(self, **changes: Any) -> dict[str, Any]:
        """Change faults at run time; unknown keys or bad values raise ValueError."""
        unknown = set(changes) - set(_CONFIG_KEYS)
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)}; known: {list(_CONFIG_KEYS)}")
        numbers = ("rate_per_second", "error_rate", "latency_ms", "receipt_delay_s")
        for key in (*numbers, "hang_after_accept_s"):
            if key in changes:
                value = changes[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ValueError(f"{key} must be a number >= 0, not {value!r}")
                if key == "error_rate" and value > 1:
                    raise ValueError(f"error_rate must be within 0..1, not {value!r}")
        for key in ("dead_at_ticket", "dead_at_receipt"):
            if key in changes and not (
                isinstance(changes[key], list | tuple | set)
                and all(isinstance(t, str) for t in changes[key])
            ):
                raise ValueError(f"{key} must be a list of token strings")
        for key in ("ticket_errors", "receipt_errors"):
            scripts = changes.get(key)
            if key in changes and not (
                isinstance(scripts, dict)
                and all(
                    isinstance(k, str)
                    and isinstance(v, list)
                    and all(isinstance(c, str) and c for c in v)
                    for k, v in scripts.items()
                )
            ):
                raise ValueError(f"{key} must map token strings to lists of error codes")
        projects = changes.get("projects")
        if "projects" in changes and not (
            isinstance(projects, dict)
            and all(isinstance(k, str) and isinstance(v, str) and v for k, v in projects.items())
        ):
            raise ValueError("projects must map token strings to project names")
        token = changes.get("access_token")
        if token is not None and not (isinstance(token, str) and token):
            raise ValueError("access_token must be a non-empty string or null")
        for key, value in changes.items():
            if key in ("dead_at_ticket", "dead_at_receipt"):
                value = set(value)
            elif key in ("ticket_errors", "receipt_errors"):
                value = {k: list(v) for k, v in value.items()}
            elif key == "projects":
                value = dict(value)
            elif key in ("error_rate", "latency_ms", "receipt_delay_s", "hang_after_accept_s"):
                value = float(value)
            setattr(self, key, value)
        return self.config()

    # -- recorded state ----------------------------------------------------------------------
    def pushes(self, since_ms: int | None = None) -> list[dict[str, Any]]:
        """Accepted pushes, oldest first: to, title, body, data, received_at_ms, ticket_id."""
        with self._lock:
            records = list(self._pushes)
        if since_ms is not None:
            records = [r for r in records if r["received_at_ms"] >= since_ms]
        return records

    def clear(self) -> None:
        """Forget recorded pushes, receipts and counters (faults stay as they are)."""
        with self._lock:
            self._pushes.clear()
            self._receipts.clear()
            self._stats.clear()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._stats)
        nested: dict[str, Any] = {"ticket_errors": {}, "http_errors": {}}
        for key, value in counts.items():
            group, _, name = key.partition(":")
            if name:
                nested[group][name] = value
            else:
                nested[key] = value
        for key in (
            "requests",
            "pushes_accepted",
            "http_429",
            "receipts_returned",
            "gzip_requests",
        ):
            nested.setdefault(key, 0)
        return nested

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeExpo is not started")
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def start(self) -> FakeExpo:
        """Bind (port 0 = a free port) and serve on a daemon thread; ``url`` is then set."""
        if self._server is not None:
            return self
        self._server = FakeExpoServer((self.host, self.port), FakeExpoHandler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="fake-expo",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop open keep-alive connections."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeExpo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
