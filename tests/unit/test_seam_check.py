"""The storage-seam check of ``make lint`` (tools/seam_check.py): what it calls naming a
collection outside the MongoDB adapter."""

from __future__ import annotations

from tools.seam_check import ROOT, SCHEMA, collection_names, findings_in, main, product_files

NAMES = collection_names((ROOT / SCHEMA).read_text())


def found(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.what) for f in findings_in(source, "sample.py", NAMES)]


def test_the_schemas_collection_constants_are_known_and_its_index_names_are_not() -> None:
    assert NAMES["USERS"] == "users" and NAMES["MESSAGES"] == "notification_messages"
    assert NAMES["IDEMPOTENCY"] == "api_idempotency"
    assert NAMES["CONSOLE_SESSIONS"] == "console_sessions"
    assert "PENDING_UNIQUE" not in NAMES and "MESSAGES_BY_USER" not in NAMES


def test_a_database_subscript_is_flagged_with_its_line() -> None:
    sample = 'def f(db):\n    return db["users"].find_one({"_id": 1})\n'
    assert found(sample) == [(2, "a collection by subscript: db['users']")]


def test_every_spelling_of_a_collection_is_flagged() -> None:
    sample = "\n".join(
        [
            "from shared.store import db as dbm",  # 1
            "from shared.store.db import TOKENS",  # 2
            "x = self.database[name]",  # 3
            "y = b.db.notification_tokens",  # 4
            "z = client.get_collection(n)",  # 5
            "w = dbm.MESSAGES",  # 6
            "v = 'send_journal'",  # 7
            "u = self._database()[c]",  # 8
        ]
    )
    lines = sorted({line for line, _ in found(sample)})
    assert lines == [2, 3, 4, 5, 6, 7, 8]


def test_clean_code_and_the_ordinary_words_pass() -> None:
    sample = "\n".join(
        [
            "from shared.store import db as dbm",
            "from shared.store.mongo import reads",
            'router = APIRouter(prefix="/v1/users", tags=["users"])',
            'COMMANDS = {"reminders": "creator.cli"}',
            "doc = reads.user(database, user_id)",
            'label = doc["users"]',
            "dbm.translate_errors('reading')",
            "dbm.PENDING_UNIQUE",
            '"""A docstring that names notification_messages in passing."""',
        ]
    )
    assert found(sample) == []


def test_the_adapter_and_the_schema_are_not_checked() -> None:
    checked = {p.relative_to(ROOT).as_posix() for p in product_files(["shared"])}
    assert "shared/store/db.py" not in checked
    assert not any(p.startswith("shared/store/mongo/") for p in checked)
    assert "shared/store/abc_web.py" in checked


def test_the_product_as_it_stands_passes(capsys) -> None:
    assert main([]) == 0, capsys.readouterr().out
