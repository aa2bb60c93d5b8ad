"""The in-memory twin of the registrations stores (``shared.store.abc_registrations``): the
semantics of ``shared.store.mongo.registrations``, the partial unique indexes of
``shared.store.db`` (one active registration per device id, and per token string) included."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from shared.domain.messages import Doc
from shared.store.memory.base import Tables, out
from shared.store.memory.intent import MemoryIntentLog
from shared.store.memory.tokens import MemoryTokens


class MemoryRegistrations:
    def __init__(self, tables: Tables) -> None:
        self.t = tables
        self.tokens = MemoryTokens(tables)  # the deactivation the consumer shares

    def active_for(self, device: str, token: str) -> list[Doc]:
        return self.active_holding([device], [token])

    def active_holding(self, devices: Collection[str], strings: Collection[str]) -> list[Doc]:
        devs, strs = set(devices), set(strings)
        with self.t.lock:
            return [
                out(d)
                for d in self.t.tokens.values()
                if d.get("isActive") is True
                and (_among(d.get("deviceId"), devs) or _among(d.get("token"), strs))
            ]

    def of_user(self, user_id: str) -> list[Doc]:
        with self.t.lock:
            docs = [out(d) for d in self.t.tokens.values() if d.get("userId") == user_id]
        return sorted(docs, key=_created)

    def insert(self, doc: Doc) -> bool:
        return not self.insert_many([doc])

    def insert_many(self, docs: Sequence[Doc]) -> set[int]:
        refused: set[int] = set()
        with self.t.lock:
            for k, doc in enumerate(docs):
                if self._collides(doc):
                    refused.add(k)
                else:
                    self.t.tokens[doc["_id"]] = out(doc)
        return refused

    def _collides(self, doc: Doc) -> bool:
        """Whether MongoDB would refuse ``doc``: its ``_id`` exists, or it is active and an
        active registration holds its device id (a missing one is null, as an index keys it) or
        its token string (the token index's filter: ``{isActive: true, token: string}``)."""
        if doc["_id"] in self.t.tokens:
            return True
        if doc.get("isActive") is not True:
            return False
        token = doc.get("token")
        for d in self.t.tokens.values():
            if d.get("isActive") is not True:
                continue
            if d.get("deviceId") == doc.get("deviceId"):
                return True
            if isinstance(token, str) and d.get("token") == token:
                return True
        return False

    def deactivate(self, token_ids: Collection[str], reason: str, now: dt.datetime) -> list[Doc]:
        return self.tokens.deactivate(token_ids, reason, now)

    def deactivate_holding(
        self, reason: str, now: dt.datetime, *, token: str | None, device: str | None
    ) -> list[Doc]:
        if token is None and device is None:
            raise ValueError("deactivate_holding needs a token string or a device id")
        return self.tokens.deactivate_where(
            lambda d: (
                (token is None or d.get("token") == token)
                and (device is None or d.get("deviceId") == device)
            ),
            reason,
            now,
        )

    def deactivate_login(
        self, user_id: str, device: str, reason: str, now: dt.datetime
    ) -> list[Doc]:
        return self.tokens.deactivate_where(
            lambda d: d.get("userId") == user_id and d.get("deviceId") == device, reason, now
        )

    def deactivate_of_user(self, user_id: str, reason: str, now: dt.datetime) -> list[Doc]:
        return self.tokens.deactivate_where(lambda d: d.get("userId") == user_id, reason, now)

    def deactivate_ids_of(
        self, token_ids: Collection[str], user_ids: Collection[str], reason: str, now: dt.datetime
    ) -> list[Doc]:
        ids, users = set(token_ids), set(user_ids)
        return self.tokens.deactivate_where(
            lambda d: d["_id"] in ids and _among(d.get("userId"), users), reason, now
        )

    def delete_of_user(self, user_id: str) -> int:
        with self.t.lock:
            gone = [i for i, d in self.t.tokens.items() if d.get("userId") == user_id]
            for i in gone:
                del self.t.tokens[i]
        return len(gone)

    def delete_ids_of(self, token_ids: Collection[str], user_ids: Collection[str]) -> int:
        ids, users = set(token_ids), set(user_ids)
        with self.t.lock:
            gone = [i for i in ids if _among(self.t.tokens.get(i, {}).get("userId"), users)]
            for i in gone:
                del self.t.tokens[i]
        return len(gone)


def _among(value: object, wanted: set[str]) -> bool:
    """MongoDB's ``{$in: wanted}`` on a field (a value that is no string matches no string)."""
    return isinstance(value, str) and value in wanted


def _created(doc: Doc) -> tuple[int, dt.datetime]:
    """MongoDB's ascending sort on ``createdAt``: what is not a date (missing, null) first,
    in table order."""
    at = doc.get("createdAt")
    return (1, at) if isinstance(at, dt.datetime) else (0, dt.datetime.min.replace(tzinfo=dt.UTC))


class MemoryChanges(MemoryIntentLog):
    def erase_counters(self, user_id: str) -> int:
        now = dt.datetime.now(dt.UTC)  # as on MongoDB: ``at`` is what the TTL compares
        with self.t.lock:
            for key, d in self.t.counters.items():
                if d.get("userId") is None:  # written before counters carried their user
                    d.update(userId=str(key).rpartition(":")[0], at=now)
            gone = [k for k, d in self.t.counters.items() if d.get("userId") == user_id]
            for k in gone:
                del self.t.counters[k]
        return len(gone)
