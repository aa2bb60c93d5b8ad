"""Fail when product code names a MongoDB collection outside the adapter (``make lint``).

The storage seam (docs/architecture.md, ``shared/store``): services speak to the store's
interfaces, and only the MongoDB adapter (``shared/store/mongo/``) and the schema
(``shared/store/db.py``: names, indexes) name a collection. Anywhere else this reports, with
file and line:

- a subscript of a database, ``db[...]``, ``database[...]``, ``self.db[...]``,
  ``database()[...]`` (whatever the key), or a collection by attribute (``db.users``) or by
  ``get_collection``;
- a collection-name constant of ``shared/store/db.py`` (``dbm.USERS``, ``from shared.store.db
  import MESSAGES``): the names in its ``ALL_COLLECTIONS`` and ``API_COLLECTIONS``;
- a string that is exactly a collection's name (``"notification_messages"``). ``"users"`` and
  ``"reminders"`` are also the words of routes, commands and pages: for them only the subscript
  and attribute forms above count.

Exit status 1 names each finding outside ``ALLOWED``; findings in ``ALLOWED`` paths are counted,
and an allowed path with none left is named, so the list can be emptied as the moves land.

    python -m tools.seam_check            # the product packages
    python -m tools.seam_check api ops    # some of them (files or directories)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shared", "creator", "consumer", "ops", "devstack", "api")
SCHEMA = "shared/store/db.py"
ADAPTER = "shared/store/mongo/"
# The tuples of ``shared/store/db.py`` whose names are collections (the others name indexes).
NAME_TUPLES = ("ALL_COLLECTIONS", "API_COLLECTIONS")
# Collection names that are also ordinary words of the product (routes, commands, pages).
WORDS = frozenset({"users", "reminders"})
DATABASE_NAMES = frozenset({"db", "database", "_db", "_database"})

# Paths whose findings are tolerated for now: code that a move of the storage seam has still to
# take behind it (each with a comment naming the move). Empty: every move of issue 31 is in. A
# path whose findings are gone is named by the check until it is taken off.
ALLOWED: tuple[str, ...] = ()


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def collection_names(schema: str) -> dict[str, str]:
    """The collection-name constants of ``shared/store/db.py``'s source: constant -> name."""
    tree = ast.parse(schema)
    strings: dict[str, str] = {}
    listed: list[str] = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            strings[target.id] = node.value.value
        elif target.id in NAME_TUPLES and isinstance(node.value, ast.Tuple):
            listed += [e.id for e in node.value.elts if isinstance(e, ast.Name)]
    return {c: strings[c] for c in listed if c in strings}


def _is_database(node: ast.expr) -> bool:
    """``db``, ``database``, ``x.db``, ``self._database``, or a call of one of them."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id in DATABASE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in DATABASE_NAMES


def _schema_aliases(tree: ast.Module) -> set[str]:
    """Names under which a module imports ``shared.store.db``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "shared.store":
            out |= {a.asname or a.name for a in node.names if a.name == "db"}
        elif isinstance(node, ast.Import):
            out |= {a.asname for a in node.names if a.name == "shared.store.db" and a.asname}
    return out


def findings_in(source: str, path: str, names: dict[str, str]) -> Iterator[Finding]:
    """What names a collection in one module's ``source``, by line."""
    tree = ast.parse(source, path)
    aliases = _schema_aliases(tree)
    values = set(names.values())
    distinct = values - WORDS
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_database(node.value):
            yield Finding(path, node.lineno, f"a collection by subscript: {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute):
            if _is_database(node.value) and node.attr in values:
                yield Finding(path, node.lineno, f"a collection by attribute: {ast.unparse(node)}")
            elif node.attr == "get_collection":
                yield Finding(path, node.lineno, f"a collection by name: {ast.unparse(node)}")
            elif (
                isinstance(node.value, ast.Name) and node.value.id in aliases and node.attr in names
            ):
                yield Finding(path, node.lineno, f"a collection's constant: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.module == "shared.store.db":
            for a in node.names:
                if a.name in names:
                    yield Finding(path, node.lineno, f"a collection's constant imported: {a.name}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in distinct
        ):
            yield Finding(path, node.lineno, f"a collection's name: {node.value!r}")


def product_files(roots: Iterable[str]) -> Iterator[Path]:
    """The product's Python files under ``roots`` (files or directories, relative to the
    repository), without the adapter and the schema."""
    for root in roots:
        top = ROOT / root
        for p in sorted([top] if top.is_file() else top.rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel == SCHEMA or rel.startswith(ADAPTER):
                continue
            yield p


def check(roots: Iterable[str]) -> list[Finding]:
    """Every finding in the product files under ``roots``, in path and line order."""
    names = collection_names((ROOT / SCHEMA).read_text())
    found: list[Finding] = []
    for p in product_files(roots):
        rel = p.relative_to(ROOT).as_posix()
        found += findings_in(p.read_text(), rel, names)
    one_a_line = {(f.path, f.line): f for f in reversed(found)}  # the outermost form of a line
    return sorted(one_a_line.values())


def main(argv: Sequence[str]) -> int:
    roots = tuple(argv) or PACKAGES
    found = check(roots)
    allowed = [f for f in found if f.path in ALLOWED]
    wrong = [f for f in found if f.path not in ALLOWED]
    for f in wrong:
        print(f)
    if not argv:
        for path in sorted(set(ALLOWED) - {f.path for f in allowed}):
            print(f"{path}: names no collection any more: take it off ALLOWED in {__file__}")
    if wrong:
        print(
            f"{len(wrong)} place(s) name a collection outside the MongoDB adapter "
            f"({ADAPTER}): give the store a method there and call it"
        )
        return 1
    note = f"; {len(allowed)} in the {len(ALLOWED)} paths still ALLOWED" if allowed else ""
    print(f"no collection named outside {ADAPTER} in {', '.join(roots)}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
