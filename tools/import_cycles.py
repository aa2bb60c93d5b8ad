"""Fail when a product module imports itself round a circle (``make lint``).

The import graph is grimp's (import-linter's own library), every import counted: at module top,
inside a function, or under ``TYPE_CHECKING``, since each of them ties the two modules together
for whoever reads or moves them. Exit status 1 names each circle found, one shortest circle per
strongly connected group of modules, with the line of each import in it.

    python -m tools.import_cycles            # the product packages
    python -m tools.import_cycles shared api # some of them
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Mapping, Sequence

PACKAGES = ("shared", "creator", "consumer", "ops", "devstack", "api")


def groups(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan, without recursion), each
    sorted, in order of their first module; a module importing itself is a group of one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in edges.get(node, ()):
                    out.append(sorted(group))
    return sorted(out)


def circle(edges: Mapping[str, Iterable[str]], group: Sequence[str]) -> list[str]:
    """A shortest circle through the group's first module, inside the group: ``[a, b, ..., a]``."""
    start, members = group[0], set(group)
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(edges.get(node, ())):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start] * 2
                if child in members and child not in came:
                    came[child] = node
                    nxt.append(child)
        frontier = nxt
    raise ValueError(f"{group} is not a circle")


def main(argv: Sequence[str]) -> int:
    import grimp  # import-linter's graph; only this entry point needs it

    packages = tuple(argv) or PACKAGES
    graph = grimp.build_graph(*packages, cache_dir=None)
    ours = set(graph.modules)
    edges = {m: graph.find_modules_directly_imported_by(m) & ours for m in graph.modules}
    found = groups(edges)
    for group in found:
        path = circle(edges, group)
        print(f"import cycle among {len(group)} modules: {' -> '.join(path)}")
        for a, b in itertools.pairwise(path):
            lines = sorted(
                d["line_number"] for d in graph.get_import_details(importer=a, imported=b)
            )
            print(f"    {a} imports {b} (line {', '.join(map(str, lines))})")
    if found:
        return 1
    print(f"no import cycle in {', '.join(packages)} ({len(ours)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
