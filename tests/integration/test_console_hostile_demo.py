"""``tzpush demo``'s consumer is a live sender: the demo's console shows a consumer on every
category (not a red "no consumer"), and the demo leaves the registry when it stops. The demo
runs for real on the test stack; only its watching (``_watch``, the 80 s of test_demo.py) is
replaced by a look at the registry while everything runs."""

from __future__ import annotations

from typing import Any

from ops import demo
from shared.clock import utcnow
from shared.store.fleet import categories_without_consumer


def test_the_demo_consumer_registers_as_a_live_sender_of_every_category(stack, monkeypatch):
    seen: dict[str, Any] = {}

    def look(database, *args: Any) -> None:
        categories = list(stack.settings.categories)
        seen["missing"] = categories_without_consumer(database, categories, utcnow())

    monkeypatch.setattr(demo, "_watch", look)
    opts = demo.DemoOptions(
        database="tzpush_demo_fleet_test",
        fake_port=0,
        users=8,  # the demo turns u03, u05 and u07 into its special cases
        services=False,
        live=False,
        api=False,
    )
    client = stack.mongo_client()
    try:
        demo.run_demo(stack.settings, opts)
        assert seen["missing"] == [], "the demo's console would say 'no consumer' for these"
        left = categories_without_consumer(client[opts.database], ["meal"], utcnow())
        assert left == ["meal"], "the demo's consumer stayed in the registry after it stopped"
    finally:
        client.drop_database(opts.database)
        client.close()
