"""The Users list's prefix range (``api.console.userlist``): every id that starts with the
prefix is inside ``[prefix, _after_prefix(prefix))``, and nothing else is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.console.userlist import _after_prefix

MAX = "\U0010ffff"


def test_no_upper_bound_for_an_empty_prefix_or_one_of_the_highest_code_point():
    assert _after_prefix("") is None
    assert _after_prefix(MAX * 3) is None


def test_the_bound_steps_the_last_code_point_below_the_highest():
    assert _after_prefix("al") == "am"
    assert _after_prefix("a" + MAX) == "b"
    assert _after_prefix("x%4") == "x%5"


@given(st.text(min_size=1, max_size=4), st.text(max_size=4))
def test_an_id_is_in_the_range_exactly_when_it_starts_with_the_prefix(prefix, other):
    upper = _after_prefix(prefix)
    for uid in (prefix + other, other):
        inside = uid >= prefix and (upper is None or uid < upper)
        assert inside == uid.startswith(prefix), (prefix, uid, upper)
