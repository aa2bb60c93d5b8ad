"""User documents as the management writers need them: read, upsert, insert, delete."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pymongo import UpdateOne
from pymongo.database import Database

from shared.domain.messages import Doc
from shared.store import db as dbm


def get(database: Database[Doc], user_id: str, fields: Collection[str] | None = None) -> Doc | None:
    """The stored user (only ``fields`` with them), or None."""
    proj = dict.fromkeys(fields, 1) if fields is not None else None
    return database[dbm.USERS].find_one({"_id": user_id}, proj)


def get_many(database: Database[Doc], user_ids: Collection[str]) -> dict[str, Doc]:
    """Those of these users that exist, by id."""
    flt = {"_id": {"$in": sorted(user_ids)}}
    return {str(d["_id"]): d for d in database[dbm.USERS].find(flt)}


def upsert(database: Database[Doc], user_id: str, update: Doc, *, create: bool) -> Doc | None:
    """Apply ``update`` to the user (``create``: also when it does not exist); the user as
    stored then, or None (it does not exist).

    An update then a read by ``_id``, not ``find_one_and_update``: SecantusDB reads the whole
    collection for a ``find_one_and_update`` even by ``_id`` (0.65 s at 100k users), where
    MongoDB uses the ``_id`` index."""
    database[dbm.USERS].update_one({"_id": user_id}, update, upsert=create)
    return get(database, user_id)


def bulk_upsert(database: Database[Doc], ops: list[UpdateOne]) -> set[str]:
    """Apply these user upserts in one unordered write; the ids it created."""
    result = database[dbm.USERS].bulk_write(ops, ordered=False)
    return {str(u) for u in (result.upserted_ids or {}).values()}


def insert_many(database: Database[Doc], docs: list[Doc]) -> set[int]:
    """Insert new users (unordered); the positions of those refused (their id was taken)."""
    return dbm.insert_refused(database[dbm.USERS], docs)


def delete(database: Database[Doc], user_id: str) -> None:
    database[dbm.USERS].delete_one({"_id": user_id})


def lookup(user_id: str, update: Any, *, create: bool) -> UpdateOne:
    """The upsert of one user, for ``bulk_upsert``."""
    return UpdateOne({"_id": user_id}, update, upsert=create)
