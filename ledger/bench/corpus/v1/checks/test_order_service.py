"""Corpus checks for order_service.py (run by ``ledger bench --corpus`` against each answer)."""

from __future__ import annotations

from datetime import UTC, datetime

import order_service as osvc
import pytest

ORG = "org-1"
OTHER_ORG = "org-2"
ITEMS = [{"product_id": "p1", "quantity": 2, "unit_price": 10.005},
         {"product_id": "p2", "quantity": 1, "unit_price": 5}]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def make(notify=None):
    clock = Clock()
    return osvc.OrderService(notify_shipped=notify, clock=clock), clock


def test_create_returns_pending_order_with_total():
    svc, clock = make()
    order = svc.create(ORG, "c1", ITEMS, "USD")
    assert order["status"] == "pending"
    assert order["total"] == pytest.approx(25.01)
    assert order["created_at"] == clock.now
    assert order["org_id"] == ORG and order["customer_id"] == "c1" and order["currency"] == "USD"
    assert isinstance(order["id"], str) and order["id"]


@pytest.mark.parametrize("args", [
    ("", "c1", ITEMS, "USD"),
    (ORG, "", ITEMS, "USD"),
    (ORG, "c1", [], "USD"),
    (ORG, "c1", [{"product_id": "p", "quantity": 0, "unit_price": 1}], "USD"),
    (ORG, "c1", [{"product_id": "p", "quantity": True, "unit_price": 1}], "USD"),
    (ORG, "c1", [{"product_id": "p", "quantity": 1, "unit_price": -1}], "USD"),
    (ORG, "c1", [{"product_id": "", "quantity": 1, "unit_price": 1}], "USD"),
    (ORG, "c1", ITEMS, "usd"),
    (ORG, "c1", ITEMS, "USDX"),
])
def test_create_rejects_invalid_input(args):
    svc, _ = make()
    with pytest.raises(ValueError):
        svc.create(*args)


def test_get_is_scoped_to_the_organisation():
    svc, _ = make()
    order = svc.create(ORG, "c1", ITEMS, "USD")
    assert svc.get(order["id"], ORG)["id"] == order["id"]
    with pytest.raises(osvc.OrderNotFound):
        svc.get(order["id"], OTHER_ORG)
    with pytest.raises(osvc.OrderNotFound):
        svc.get("missing", ORG)


def test_returned_orders_are_copies():
    svc, _ = make()
    order = svc.create(ORG, "c1", ITEMS, "USD")
    order["status"] = "delivered"
    assert svc.get(order["id"], ORG)["status"] == "pending"


def test_full_forward_path_and_cancellation_rules():
    svc, _ = make()
    oid = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    for status in ("confirmed", "processing", "shipped", "delivered"):
        assert svc.update_status(oid, status, ORG)["status"] == status
    with pytest.raises(osvc.InvalidTransition):
        svc.update_status(oid, "cancelled", ORG)
    other = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    assert svc.update_status(other, "cancelled", ORG)["status"] == "cancelled"
    with pytest.raises(osvc.InvalidTransition):
        svc.update_status(other, "cancelled", ORG)


@pytest.mark.parametrize("path", [("confirmed", "confirmed"), ("processing",), ("shipped",),
                                  ("confirmed", "pending"), ("delivered",)])
def test_invalid_transitions_raise(path):
    svc, _ = make()
    oid = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    *ok, bad = path
    for status in ok:
        svc.update_status(oid, status, ORG)
    with pytest.raises(osvc.InvalidTransition):
        svc.update_status(oid, bad, ORG)


def test_unknown_status_and_missing_order():
    svc, _ = make()
    oid = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    with pytest.raises(ValueError):
        svc.update_status(oid, "lost", ORG)
    with pytest.raises(osvc.OrderNotFound):
        svc.update_status(oid, "confirmed", OTHER_ORG)


def test_shipping_notifies_and_survives_a_failing_notifier():
    seen = []
    svc, _ = make(notify=lambda order: seen.append(order["id"]))
    oid = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    for status in ("confirmed", "processing", "shipped"):
        svc.update_status(oid, status, ORG)
    assert seen == [oid]

    def boom(order):
        raise RuntimeError("smtp down")

    svc2, _ = make(notify=boom)
    oid2 = svc2.create(ORG, "c1", ITEMS, "USD")["id"]
    for status in ("confirmed", "processing"):
        svc2.update_status(oid2, status, ORG)
    shipped = svc2.update_status(oid2, "shipped", ORG)
    assert shipped["status"] == "shipped"
    assert svc2.get(oid2, ORG)["notification_error"] == "smtp down"


def test_bulk_update_skips_invalid_and_missing():
    svc, _ = make()
    a = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    b = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    c = svc.create(OTHER_ORG, "c1", ITEMS, "USD")["id"]
    svc.update_status(b, "cancelled", ORG)
    assert svc.bulk_update_status([a, b, c, "nope"], "confirmed", ORG) == 1
    assert svc.get(a, ORG)["status"] == "confirmed"
    with pytest.raises(ValueError):
        svc.bulk_update_status([a], "lost", ORG)


def test_list_orders_filters_and_pages():
    svc, _ = make()
    ids = [svc.create(ORG, f"c{i % 2}", ITEMS, "USD")["id"] for i in range(5)]
    svc.create(OTHER_ORG, "c0", ITEMS, "USD")
    svc.update_status(ids[1], "confirmed", ORG)
    assert [o["id"] for o in svc.list_orders(ORG)] == ids
    assert [o["id"] for o in svc.list_orders(ORG, customer_id="c0")] == ids[0::2]
    assert [o["id"] for o in svc.list_orders(ORG, status="confirmed")] == [ids[1]]
    assert [o["id"] for o in svc.list_orders(ORG, limit=2, offset=1)] == ids[1:3]
    for bad in ({"limit": 0}, {"limit": 101}, {"offset": -1}):
        with pytest.raises(ValueError):
            svc.list_orders(ORG, **bad)


def test_delete_is_scoped():
    svc, _ = make()
    oid = svc.create(ORG, "c1", ITEMS, "USD")["id"]
    with pytest.raises(osvc.OrderNotFound):
        svc.delete(oid, OTHER_ORG)
    svc.delete(oid, ORG)
    with pytest.raises(osvc.OrderNotFound):
        svc.get(oid, ORG)


def test_monthly_revenue_by_currency():
    svc, clock = make()
    svc.create(ORG, "c1", [{"product_id": "p", "quantity": 1, "unit_price": 10}], "USD")
    svc.create(ORG, "c1", [{"product_id": "p", "quantity": 3, "unit_price": 1.1}], "EUR")
    cancelled = svc.create(ORG, "c1", [{"product_id": "p", "quantity": 1, "unit_price": 99}], "USD")
    svc.update_status(cancelled["id"], "cancelled", ORG)
    svc.create(OTHER_ORG, "c1", [{"product_id": "p", "quantity": 1, "unit_price": 50}], "USD")
    clock.now = datetime(2026, 4, 1, 0, 0, tzinfo=UTC)
    svc.create(ORG, "c1", [{"product_id": "p", "quantity": 1, "unit_price": 7}], "USD")
    assert svc.monthly_revenue(2026, 3, ORG) == [{"currency": "EUR", "total": pytest.approx(3.3)},
                                                  {"currency": "USD", "total": pytest.approx(10.0)}]
    assert svc.monthly_revenue(2026, 4, ORG) == [{"currency": "USD", "total": pytest.approx(7.0)}]
    with pytest.raises(ValueError):
        svc.monthly_revenue(2026, 13, ORG)
