"""Orders."""

from shop.validators import validate_sku


class Order:
    def __init__(self):
        self.lines = []  # (sku, quantity)

    def add_line(self, sku, quantity):
        sku = validate_sku(sku)
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        self.lines.append((sku, quantity))

    def total_items(self):
        return sum(q for _, q in self.lines)
