"""Print the OpenAPI document ``tzpush api`` serves (default settings), without a server.

``api.app.create_app`` is pure wiring: the document depends only on the routes, the models and
the settings' categories, so a backend holding just the settings (and no API key) is enough.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any, cast

from api.app import create_app
from api.keys import KeyRing
from shared.settings import Settings


def main() -> None:
    app = create_app(cast(Any, SimpleNamespace(settings=Settings(), keys=KeyRing([]))))
    json.dump(app.openapi(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
