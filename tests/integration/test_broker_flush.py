"""A flush (a receipt on an empty transaction) answers as soon as the broker has read it.

STOMP frames are small and the client writes them in separate writes: with Nagle's algorithm on,
the second frame of BEGIN + ABORT waited for the ACK of the first, which the broker's kernel
delays up to 40 ms. Every flush (each planning change, each management call through the API)
took 44 ms on an idle local broker; with ``TCP_NODELAY`` it takes about 0.5 ms.
"""

from __future__ import annotations

import socket
import statistics
import time

from shared.broker import StompClient

NAGLE_STALL_MS = 40.0


def test_the_broker_connection_sends_each_frame_at_once(stack):
    client = StompClient(stack.settings).connect()
    try:
        sock = client._conn.transport.socket
        assert sock is not None
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        client.flush()
        took = []
        for _ in range(9):
            t0 = time.perf_counter()
            client.flush()
            took.append((time.perf_counter() - t0) * 1000)
        # The stall is the delayed-ACK timer (40 ms); an answered flush is under a millisecond
        # here. Half the timer leaves room for a noisy machine.
        assert statistics.median(took) < NAGLE_STALL_MS / 2, took
    finally:
        client.close()
