"""Journal rows are stored packed (one binary value per group commit) and read back whole as the
entries the merge reads; documents written before packing (``entries``) still read."""

from __future__ import annotations

import datetime as dt

from shared.domain.outcomes import ROW_FIELDS, journal_entries, pack_journal, row_entries
from shared.store.journal import entry_ops

AT = dt.datetime(2026, 11, 30, 18, 0, 0, 123000, tzinfo=dt.UTC)
DUE_MS = int(AT.timestamp() * 1000) - 5


def row(i: int, ok: bool = True) -> list:
    return [
        f"m{i}",
        ok,
        f"t{i}" if ok else None,
        None if ok else "DeviceNotRegistered",
        "" if ok else '"ExponentPushToken[x]" is not a registered recipient',
        1,
        f"tok{i}",
        f"u{i}",
        not ok,
        "2026-11-30",
        DUE_MS,
        None if ok else "DeviceNotRegistered",
    ]


def test_rows_read_back_as_entries_with_their_request_instant():
    later = AT + dt.timedelta(seconds=1)
    r1, r2, r3 = row(1), row(2, ok=False), [*row(3)[:4], "Ünïcode ✓", *row(3)[5:]]
    doc = {"_id": "j", "consumer": "c1", "packed": pack_journal([(AT, [r1, r2]), (later, [r3])])}
    back = journal_entries(doc)
    assert [e["id"] for e in back] == ["m1", "m2", "m3"]
    assert back[0] == {**dict(zip(ROW_FIELDS, r1, strict=True)), "at": AT, "consumer": "c1"}
    assert back[2]["at"] == later and back[2]["message"] == "Ünïcode ✓"
    assert back[0]["at"].tzinfo is not None


def test_instants_keep_milliseconds_like_bson_dates():
    odd = dt.datetime(2026, 11, 30, 18, 0, 0, 999999, tzinfo=dt.UTC)
    back = journal_entries({"consumer": "c1", "packed": pack_journal([(odd, [row(1)])])})
    assert back[0]["at"] == odd.replace(microsecond=999000)  # truncated, as BSON does


def test_the_same_ops_from_packed_rows_and_from_old_documents():
    rows = [row(1), row(2, ok=False)]
    packed = journal_entries({"consumer": "c1", "packed": pack_journal([(AT, rows)])})
    old = journal_entries({"entries": row_entries(rows, AT, "c1")})
    assert repr(entry_ops(packed, 900)) == repr(entry_ops(old, 900))
    updates, effects, refunds = entry_ops(packed, 900)
    assert len(updates) == 2 and [e.kind for e in effects] == ["ok", "dead"]
    assert refunds == {"u2:2026-11-30": 1}  # the capped failure gives its reservation back


def test_rows_journaled_before_codes_still_merge_the_same():
    """A consumer of the previous release journaled 11-field rows (no code): a rolling deploy
    merges them with the same token effects, the code read back from the label."""
    new = [
        row(1),
        row(2, ok=False),
        [
            *row(3, ok=False)[:3],
            "HTTP 503 after 3 retries",
            "x",
            4,
            "tok3",
            "u3",
            False,
            "2026-11-30",
            DUE_MS,
            "ServerError",
        ],
    ]
    old = [r[:-1] for r in new]
    ops_new = entry_ops(row_entries(new, AT, "c1"), 900)
    ops_old = entry_ops(row_entries(old, AT, "c1"), 900)
    assert [e.kind for e in ops_old[1]] == [e.kind for e in ops_new[1]] == ["ok", "dead"]
    assert repr(ops_old[0]) == repr(ops_new[0])
