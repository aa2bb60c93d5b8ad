"""The consumer's quick index check: one round trip when the last full run recorded this plan,
the full run otherwise; the full run always recreates what was dropped."""

from __future__ import annotations

from shared.store import db as dbm


def test_trusting_the_marker_skips_only_when_this_plan_was_ensured(db):
    dbm.ensure_indexes(db, trust_marker=True)  # no marker yet: the full run
    assert dbm.missing_indexes(db) == []
    marker = db[dbm.STATE].find_one({"_id": dbm.INDEX_PLAN_ID})
    assert marker is not None and marker["digest"] == dbm.index_plan_digest()

    db[dbm.TOKENS].drop_index("tokens_by_user")
    dbm.ensure_indexes(db, trust_marker=True)  # marker trusted: nothing done
    assert dbm.missing_indexes(db) == [f"{dbm.TOKENS}.tokens_by_user"]

    dbm.ensure_indexes(db)  # the full run (creator start, doctor --fix-indexes) brings it back
    assert dbm.missing_indexes(db) == []

    db[dbm.TOKENS].drop_index("tokens_by_user")
    db[dbm.STATE].update_one({"_id": dbm.INDEX_PLAN_ID}, {"$set": {"digest": "an-older-plan"}})
    dbm.ensure_indexes(db, trust_marker=True)  # another plan was recorded: the full run
    assert dbm.missing_indexes(db) == []
    assert db[dbm.STATE].find_one({"_id": dbm.INDEX_PLAN_ID})["digest"] == dbm.index_plan_digest()
