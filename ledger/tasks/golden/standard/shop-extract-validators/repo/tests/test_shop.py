import pytest

from shop.inventory import Inventory
from shop.orders import Order


def test_order_lines():
    o = Order()
    o.add_line("ABC-1234", 2)
    o.add_line("XYZ-0001", 1)
    assert o.total_items() == 3


def test_order_quantity():
    with pytest.raises(ValueError):
        Order().add_line("ABC-1234", 0)


def test_restock():
    inv = Inventory()
    inv.restock("ABC-1234", 5)
    inv.restock("ABC-1234", 2)
    assert inv.available("ABC-1234") == 7


def test_bad_skus_rejected():
    with pytest.raises(ValueError):
        Order().add_line("AB-123", 1)
    with pytest.raises(ValueError):
        Inventory().restock("ABCD1234", 1)
