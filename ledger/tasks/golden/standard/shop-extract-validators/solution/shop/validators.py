"""Validation shared by orders and inventory."""

import re

_SKU = re.compile(r"[A-Z]{3}-[0-9]{4}")


class InvalidSKU(ValueError):
    """A SKU that is not three letters, a hyphen and four digits."""


def validate_sku(sku):
    """Return the normalised SKU (stripped, uppercase) or raise InvalidSKU."""
    norm = sku.strip().upper()
    if not _SKU.fullmatch(norm):
        raise InvalidSKU(f"invalid SKU: {sku!r}")
    return norm
