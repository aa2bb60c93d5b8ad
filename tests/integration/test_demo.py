"""`tzpush demo` end to end, non-interactively, on the test stack (never the default ports).

The demo runs as a subprocess without a TTY (plain log lines), with its reminders at the first
whole minute at least 20 s ahead, and stops by itself once everything has ended. The test checks
that every seeded push reached the fake at its due instant, that the two changes of mind were
cancelled with their reasons, that the dead device was deactivated, and that the printed summary
matches the database. The demo also serves the HTTP API (a `tzpush api` child on a free port):
the curl line it prints works while it runs (the test calls that URL with that key, and /docs),
and the API is gone once the demo has stopped.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

from shared.store import db as dbm
from tests.integration.conftest import REPO_ROOT

DEMO_DB = "tzpush_demo_test"
CURL = re.compile(r"^curl .*/v1/users/\S+/messages$", re.M)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _curl_request(line: str) -> tuple[str, dict[str, str]]:
    """The URL and headers of a printed `curl -s -H '...' URL` line."""
    words = shlex.split(line)
    headers = {}
    for i, word in enumerate(words):
        if word == "-H":
            name, _, value = words[i + 1].partition(": ")
            headers[name] = value
    return words[-1], headers


@dataclass
class _Demo:
    """A `tzpush demo` subprocess on the test stack, its output read as it comes."""

    proc: subprocess.Popen[str]
    lines: list[str]
    curl_seen: threading.Event  # the curl line is printed: its API answers
    reader: threading.Thread
    err_file: Path

    def out(self) -> str:
        return "".join(self.lines)

    def end(self) -> None:
        """Killed if still running; its output read to the end."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=10)


def _start_demo(stack, tmp_path, *args: str, **env: str) -> _Demo:
    """``tzpush demo --no-services --fake-port 0 ARGS`` on the test stack (``env``: more)."""
    s = stack.settings
    full_env = {
        **os.environ,
        "TZPUSH_MONGO__URI": s.mongo.uri.get_secret_value(),
        "TZPUSH_STOMP__PORT": str(s.stomp.port),
        "TZPUSH_LOCAL__STATE_DIR": s.local.state_dir,
        "TZPUSH_METRICS__PORT": "0",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    cmd = [sys.executable, "-m", "ops.cli", "demo", "--no-services", "--fake-port", "0", *args]
    lines: list[str] = []
    curl_seen = threading.Event()

    def read(stream) -> None:
        for line in stream:
            lines.append(line)
            if CURL.match(line.strip()):
                curl_seen.set()

    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err:
        proc = subprocess.Popen(
            cmd, env=full_env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err, text=True
        )
    reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
    reader.start()
    return _Demo(proc, lines, curl_seen, reader, err_file)


def _answers(url: str) -> int | None:
    """The status ``url`` answers with, or None if nothing listens there any more."""
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.TransportError:
        return None


def test_demo_runs_headless_and_summary_matches_database(stack, mongo_client, tmp_path):
    api_port = _free_port()
    summary_file = tmp_path / "summary.json"
    try:
        demo = _start_demo(
            stack, tmp_path,
            "--database", DEMO_DB, "--minutes", "1", "--min-lead", "20", "--until-done",
            "--duration", "150", "--summary-json", str(summary_file), "--api-port", str(api_port),
        )  # fmt: skip
        try:
            # While the demo runs: the printed curl line works as it stands, and so does /docs.
            assert demo.curl_seen.wait(90), demo.out()[-3000:]
            out_so_far = demo.out()
            curl = CURL.search(out_so_far)
            assert curl is not None
            url, headers = _curl_request(curl.group(0))
            assert url == f"http://127.0.0.1:{api_port}/v1/users/u00/messages"
            assert headers["Authorization"].startswith("Bearer tzp_")
            answer = httpx.get(url, headers=headers, timeout=10)
            assert answer.status_code == 200, answer.text
            assert answer.json()["items"], "u00 has messages planned by now"
            assert all(m["userId"] == "u00" for m in answer.json()["items"])
            assert httpx.get(url, timeout=10).status_code == 401  # the key is what lets it in
            assert f"http://127.0.0.1:{api_port}/docs" in out_so_far
            assert httpx.get(f"http://127.0.0.1:{api_port}/docs", timeout=10).status_code == 200
            # It says that it starts from an empty database of its own (and which one).
            assert f"database {DEMO_DB!r} emptied at start" in out_so_far, out_so_far[:3000]
            demo.proc.wait(timeout=200)
        finally:
            demo.end()
        assert demo.proc.returncode == 0, demo.err_file.read_text()[-3000:]
        out = demo.out()
        # Stopped with everything else: nothing answers on the API's port any more.
        gone = _answers(f"http://127.0.0.1:{api_port}/healthz")
        assert gone is None, f"the demo's API still answers ({gone}) after the demo stopped"
        summary = json.loads(summary_file.read_text())
        database = mongo_client[DEMO_DB]
        msgs = list(database[dbm.MESSAGES].find())
    finally:
        mongo_client.drop_database(DEMO_DB)

    # The summary matches the database.
    assert summary["messages"] == dict(sorted(Counter(m["status"] for m in msgs).items()))
    assert "pending" not in summary["messages"]
    # Every seeded occurrence either reached the fake or ended with a reason.
    by_id = {m["_id"]: m for m in msgs}
    delivered = {d["id"] for d in summary["deliveries"]}
    assert len(msgs) >= 20 and len(delivered) >= 20
    assert delivered == {m["_id"] for m in msgs if m["status"] == "success"} | {
        m["_id"] for m in msgs if m.get("receipt", {}).get("error") == "DeviceNotRegistered"
    }
    zones = {by_id[i]["timezone"] for i in delivered}
    for zone in ("Asia/Tashkent", "Europe/Berlin", "America/New_York", "Australia/Sydney"):
        assert zone in zones
    assert {"Asia/Kathmandu", "Pacific/Chatham"} <= zones
    # ... at its due instant: never early, and well within a generous bound.
    for d in summary["deliveries"]:
        assert 0 <= d["lateness_ms"] < 5000, d
        due_ms = int(by_id[d["id"]]["scheduledAt"].timestamp() * 1000)
        assert d["received_at_ms"] - due_ms == d["lateness_ms"]
    # The changes of mind after planning, and the dead device.
    reasons = {e["user"]: e["reason"] for e in summary["ended"]}
    assert reasons["u03"].startswith("user turned off")
    assert reasons["u05"] == "reminder removed"
    assert reasons["u07"].startswith("receipt error DeviceNotRegistered")
    assert [t["user"] for t in summary["deactivated"]] == ["u07"]
    assert "delivered u00" in out and "lateness" in out
    assert "cancelled u05" in out and "token deactivated for u07" in out
    assert "summary: " in out


def test_a_demo_whose_database_goes_away_stops_everything_it_started(stack, tmp_path):
    """`tzpush services down` in another terminal while `make run` runs (found by a README
    walk-through): the demo's summary read failed in its cleanup, the steps after it never ran,
    and its API child (its own session, so a Ctrl-C reaches only the demo) kept answering
    after the demo had exited. Now every step of the cleanup runs whatever one before it
    raised, the demo says in one line why it stopped, and exits non-zero."""
    api_port = _free_port()
    demo = _start_demo(
        stack, tmp_path,
        "--database", DEMO_DB + "_gone", "--minutes", "3", "--min-lead", "20",
        "--duration", "150", "--api-port", str(api_port),
        TZPUSH_MONGO__TIMEOUT_MS="3000",
    )  # fmt: skip
    health = f"http://127.0.0.1:{api_port}/healthz"
    try:
        assert demo.curl_seen.wait(90), demo.out()[-3000:]
        assert httpx.get(health, timeout=10).status_code == 200
        stack.stop("mongo")
        try:
            demo.proc.wait(timeout=90)
        finally:
            stack.start("mongo")
    finally:
        demo.end()
    proc, out, err_text = demo.proc, demo.out(), demo.err_file.read_text()
    gone = _answers(health)
    assert gone is None, f"the demo's API still answers ({gone}) after it"
    assert proc.returncode not in (0, None), out[-2000:]
    assert "Traceback" not in err_text and "Traceback" not in out, err_text[-3000:]
    assert "tzpush: " in err_text and "database" in err_text, err_text[-2000:]
    with stack.mongo_client() as client:
        client.drop_database(DEMO_DB + "_gone")
