"""The HTTP API (``tzpush api``): the front door for app backends.

Users, devices, reminders and their messages for ``app`` keys, plus stats and replays for
``ops`` keys, over the same management code as the CLI (``creator.manage``, ``ops.stats``,
``ops.replay``). It never imports the consumer. docs/api.md is the guide; /openapi.json the
contract.
"""
