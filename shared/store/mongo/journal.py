"""The send journal on MongoDB (``send_journal``)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Collection

from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from shared.domain.messages import Doc
from shared.store import db as dbm


class MongoJournal:
    def __init__(self, database: Database[Doc]) -> None:
        self.coll = dbm.critical(database, dbm.JOURNAL)

    def add(self, doc: Doc) -> None:
        with contextlib.suppress(DuplicateKeyError):  # a retry of an insert that went through
            self.coll.insert_one(doc)

    def left(self, consumer: str | None = None, before: dt.datetime | None = None) -> list[Doc]:
        flt: Doc = {}
        if consumer is not None:
            flt["consumer"] = consumer
        if before is not None:
            flt["at"] = {"$lt": before}
        return list(self.coll.find(flt))

    def delete(self, ids: Collection[str]) -> None:
        if ids:
            self.coll.delete_many({"_id": {"$in": list(ids)}})
