"""Stock levels."""


class Inventory:
    def __init__(self):
        self.stock = {}

    def restock(self, sku, count):
        if len(sku) != 8 or sku[3] != "-" or not sku[:3].isalpha() or not sku[4:].isdigit():
            raise ValueError("invalid sku " + sku)
        if count < 1:
            raise ValueError("count must be at least 1")
        self.stock[sku] = self.stock.get(sku, 0) + count

    def available(self, sku):
        return self.stock.get(sku, 0)
