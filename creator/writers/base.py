"""What every management writer shares: its collaborators, the answer of an item, and the
refusals common to all of them (an unknown user, a user erased while a change was applied)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pymongo.database import Database

from creator.context import Where
from creator.planner import Planner
from shared.domain.messages import Doc
from shared.domain.validation import category_problem, validate_id
from shared.errors import InputError, NotFoundError, TzpushError
from shared.settings import Settings
from shared.store import erasure
from shared.store.abc_creator import CreatorStores


class _Item(Protocol):
    @property
    def user_id(self) -> str: ...


ItemT = TypeVar("ItemT", bound=_Item)
V = TypeVar("V")

UNREAD: Any = object()  # no ``born`` given: a call's own read of the user is the first
ERASED_MEANWHILE = "user erased while this login was applied"

Created = Literal["created", "changed", "unchanged"]


@dataclass(frozen=True)
class Done:
    """An item applied: the stored document and what happened to it."""

    doc: Doc
    change: Created


Outcome = Done | TzpushError
# Batch items left to their writer's single call, at the batch's end: (index, call, arguments).
Later = list[tuple[int, Callable[..., Done], tuple[Any, ...]]]


@dataclass
class Batch:
    """What a batch's bulk steps share: each item's outcome so far (by index), the users to
    plan, the items left to their single call, and whether an item's user exists by then."""

    out: list[Outcome | None]
    to_plan: set[str]
    later: Later
    user_ready: Callable[[int, str], bool]

    def checked(
        self, items: Iterable[tuple[int, ItemT]], check: Callable[[ItemT], V]
    ) -> list[tuple[int, ItemT, V]]:
        """Each item with ``check(item)``; an item whose check fails, or whose user does not
        exist by then (neither stored nor created by an earlier item), is answered with the
        error instead."""
        todo: list[tuple[int, ItemT, V]] = []
        for i, it in items:
            try:
                value = check(it)
                if not self.user_ready(i, it.user_id):
                    raise NotFoundError(f"no user {it.user_id!r}")
            except TzpushError as exc:
                self.out[i] = exc
                continue
            todo.append((i, it, value))
        return todo


class Context:
    """The stores (those of the planner), the planner (its clock is the writers' clock) and the
    settings. ``where``: the MongoDB database the planner's stores are made on, or those stores;
    ``db`` is that database (for the composition: the API's reads), an error over other stores."""

    def __init__(self, where: Where, planner: Planner, settings: Settings) -> None:
        self._db = None if isinstance(where, CreatorStores) else where
        self.planner = planner
        self.settings = settings

    @property
    def db(self) -> Database[Doc]:
        """The MongoDB database given (for the composition); an error over other stores."""
        if self._db is None:
            raise RuntimeError("these writers work over stores that are not MongoDB")
        return self._db

    @property
    def stores(self) -> CreatorStores:
        """The planner's stores (the writers write where it plans)."""
        return self.planner.ctx.stores

    @property
    def now(self) -> dt.datetime:
        return self.planner.clock()

    def get_user(self, user_id: str) -> Doc:
        """The stored user; ``NotFoundError`` (404) when there is none."""
        validate_id(user_id, "user id")
        doc = self.stores.users.get(user_id)
        if doc is None:
            raise NotFoundError(f"no user {user_id!r}")
        return doc

    def check_category(self, category: str) -> None:
        """``InputError`` unless ``category`` is one of the settings' categories."""
        problem = category_problem(category, self.settings.categories)
        if problem is not None:
            raise InputError(problem)

    def max_grace(self) -> int:
        """The longest grace of any category, in seconds."""
        return max(c.grace_seconds for c in self.settings.categories.values())


def erased_meanwhile(user_id: str) -> NotFoundError:
    """The answer to a creation for a user erased while it was applied (nothing of it kept)."""
    return NotFoundError(
        f"no user {user_id!r}: erased while this change was applied (nothing of it was kept)"
    )


def check_same_user(user: Mapping[str, Any], born: Any) -> None:
    """``born``: the user's ``createdAt`` as a caller read it first (``UNREAD``: none given).
    Another user found under the id now, erased and created again since, is a 404."""
    if born is not UNREAD and not erasure.same_user(born, user.get("createdAt")):
        raise erased_meanwhile(str(user["_id"]))


def guard(action: Callable[..., Done], *args: Any, **kwargs: Any) -> Outcome:
    """The action's result, or the project error it raised (anything else propagates)."""
    try:
        return action(*args, **kwargs)
    except TzpushError as exc:
        return exc
