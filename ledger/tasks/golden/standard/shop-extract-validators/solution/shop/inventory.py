"""Stock levels."""

from shop.validators import validate_sku


class Inventory:
    def __init__(self):
        self.stock = {}

    def restock(self, sku, count):
        sku = validate_sku(sku)
        if count < 1:
            raise ValueError("count must be at least 1")
        self.stock[sku] = self.stock.get(sku, 0) + count

    def available(self, sku):
        return self.stock.get(validate_sku(sku), 0)
