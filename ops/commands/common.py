"""What several operator commands share: the progress bar of a long selection."""

from __future__ import annotations

import sys
from typing import Any

PROGRESS_ABOVE = 200  # show a progress bar for selections larger than this


def progress_bar(total: int) -> Any:
    """A rich ``Progress``, shown only on a terminal and for more than ``PROGRESS_ABOVE`` items."""
    from rich.progress import Progress

    return Progress(disable=total <= PROGRESS_ABOVE or not sys.stdout.isatty(), transient=False)
