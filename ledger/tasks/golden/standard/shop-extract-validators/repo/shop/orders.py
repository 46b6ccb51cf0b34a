"""Orders."""

import re


class Order:
    def __init__(self):
        self.lines = []  # (sku, quantity)

    def add_line(self, sku, quantity):
        sku = sku.strip().upper()
        if not re.fullmatch(r"[A-Z]{3}-\d{4}", sku):
            raise ValueError(f"bad SKU: {sku!r}")
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        self.lines.append((sku, quantity))

    def total_items(self):
        return sum(q for _, q in self.lines)
