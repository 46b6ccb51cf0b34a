"""Load the stock list from CSV (sku,name,qty,price)."""

import csv
from dataclasses import dataclass


@dataclass(frozen=True)
class Item:
    sku: str
    name: str
    qty: int
    price: float


def load(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return [Item(r["sku"], r["name"], int(r["qty"]), float(r["price"])) for r in csv.DictReader(fh)]
