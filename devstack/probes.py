"""Is it up? Network probes for the local stack: a port in use, a STOMP CONNECT, a mongo ping.

Separate from the process code because they ask the network, not our pid files: they answer for
any broker or server at an address, whoever started it (the tests point `stomp_ready` at brokers
of their own), and a readiness check must be a real protocol exchange, not an open port: the
broker accepts connections well before it answers CONNECTED (docs/notes/activemq.md).
"""

from __future__ import annotations

import contextlib
import errno
import socket
from typing import Any


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on or holds host:port (bind test, like the servers do)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        if probe.connect_ex((host, port)) == 0:
            return True
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def stomp_ready(
    host: str,
    port: int,
    login: str | None = None,
    passcode: str | None = None,
    timeout: float = 2.0,
) -> bool:
    """One STOMP CONNECT; True when the broker answers CONNECTED (an open port is not enough)."""
    headers = ["accept-version:1.2", "host:localhost"]
    if login:
        headers += [f"login:{login}", f"passcode:{passcode or ''}"]
    frame = ("CONNECT\n" + "\n".join(headers) + "\n\n\0").encode()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            reply = b""
            while b"\0" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            ok = reply.lstrip(b"\r\n").startswith(b"CONNECTED")
            if ok:
                with contextlib.suppress(OSError):
                    sock.sendall(b"DISCONNECT\n\n\0")
            return ok
    except OSError:
        return False


def mongo_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the server answers ``ping`` (directConnection: it calls itself a replica set)."""
    import pymongo  # local: the CLI's other commands do not need the driver loaded

    ms = int(timeout * 1000)
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        host, port, directConnection=True, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms
    )
    try:
        client.admin.command("ping")
        return True
    except pymongo.errors.PyMongoError:
        return False
    finally:
        client.close()
