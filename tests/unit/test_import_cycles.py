"""The import-cycle check of ``make lint`` (tools/import_cycles.py): what it calls a circle."""

from __future__ import annotations

from tools.import_cycles import circle, groups


def test_a_tree_of_imports_has_no_circle() -> None:
    edges = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert groups(edges) == []


def test_two_modules_importing_each_other_are_one_circle_named_in_order() -> None:
    edges = {"creator.planner": {"creator.rearm"}, "creator.rearm": {"creator.planner"}}
    assert groups(edges) == [["creator.planner", "creator.rearm"]]
    assert circle(edges, ["creator.planner", "creator.rearm"]) == [
        "creator.planner",
        "creator.rearm",
        "creator.planner",
    ]


def test_a_long_circle_is_named_by_its_shortest_way_round() -> None:
    edges = {"a": {"b"}, "b": {"c", "a2"}, "c": {"a"}, "a2": {"c"}, "x": {"a"}}
    assert groups(edges) == [["a", "a2", "b", "c"]]
    assert circle(edges, ["a", "a2", "b", "c"]) == ["a", "b", "c", "a"]


def test_separate_circles_are_each_reported_and_a_self_import_is_one() -> None:
    edges = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}, "e": {"e"}}
    assert groups(edges) == [["a", "b"], ["c", "d"], ["e"]]
    assert circle(edges, ["e"]) == ["e", "e"]
