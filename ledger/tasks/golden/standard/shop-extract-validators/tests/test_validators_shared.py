import pytest

from shop import inventory, orders, validators
from shop.inventory import Inventory
from shop.orders import Order
from shop.validators import InvalidSKU, validate_sku


@pytest.mark.parametrize("raw, norm", [("ABC-1234", "ABC-1234"), (" abc-1234 ", "ABC-1234"), ("xYz-0000", "XYZ-0000")])
def test_normalises(raw, norm):
    assert validate_sku(raw) == norm


@pytest.mark.parametrize("bad", ["AB-1234", "ABCD-123", "ABC1234", "A1C-1234", "ABC-12345", ""])
def test_rejects(bad):
    with pytest.raises(InvalidSKU):
        validate_sku(bad)


def test_invalid_sku_is_a_value_error():
    assert issubclass(InvalidSKU, ValueError)


def test_message_names_value():
    with pytest.raises(InvalidSKU, match="QQ-1"):
        validate_sku("QQ-1")


def test_both_modules_use_the_shared_validator():
    assert orders.validate_sku is validators.validate_sku
    assert inventory.validate_sku is validators.validate_sku


def test_inventory_normalises_like_orders():
    inv = Inventory()
    inv.restock(" abc-1234 ", 3)
    inv.restock("ABC-1234", 1)
    assert inv.available("abc-1234") == 4
    o = Order()
    o.add_line(" abc-1234 ", 1)
    assert o.lines == [("ABC-1234", 1)]


def test_both_raise_the_same_error():
    with pytest.raises(InvalidSKU):
        Inventory().restock("AB-12", 1)
    with pytest.raises(InvalidSKU):
        Order().add_line("AB-12", 1)
