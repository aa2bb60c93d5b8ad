"""A TCP fault proxy: one process's connections to the database or the broker, delayed or cut.

Each tzpush process of a chaos run reaches the database and the broker through proxies of its
own (`FaultProxy` on a free loopback port in front of the real one), so one process's link can
be slowed (``delay_s`` before each chunk is passed on, both ways) or cut (every open connection
closed, new ones closed at once, until ``heal``) while the others' links stay whole.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

_CHUNK = 65536


class FaultProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream``; ``delay``, ``cut`` and ``heal`` at will."""

    def __init__(self, name: str, upstream: tuple[str, int]) -> None:
        self.name = name
        self.upstream = upstream
        self.delay_s = 0.0
        self.cut_now = False
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"proxy-{name}", daemon=True)
        self._thread.start()

    def delay(self, seconds: float) -> None:
        self.delay_s = seconds

    def cut(self) -> None:
        """Close every open connection; refuse new ones until `heal`."""
        self.cut_now = True
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            _close(conn)

    def heal(self) -> None:
        self.delay_s = 0.0
        self.cut_now = False

    def close(self) -> None:
        self._closed.set()
        self.cut()
        _close(self._listener)
        self._thread.join(timeout=2)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.cut_now:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            for s in (client, server):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data or self.cut_now:
                    break
                if self.delay_s > 0:
                    time.sleep(self.delay_s)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                _close(s)
                with self._lock:
                    self._conns.discard(s)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
