"""Checks run by ``make lint`` that no linter ships (not part of the product)."""
