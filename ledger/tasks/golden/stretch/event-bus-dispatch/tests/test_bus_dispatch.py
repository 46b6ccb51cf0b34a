import pytest

import bus as busmod
from bus import EventBus


def rec(log, name):
    return lambda t, p: log.append(name)


def test_priority_then_subscription_order():
    bus, log = EventBus(), []
    bus.subscribe("x", rec(log, "low"), priority=-1)
    bus.subscribe("x", rec(log, "a"))
    bus.subscribe("x", rec(log, "high"), priority=5)
    bus.subscribe("x", rec(log, "b"))
    assert bus.publish("x") == 4
    assert log == ["high", "a", "b", "low"]


def test_wildcard():
    bus, log = EventBus(), []
    bus.subscribe("*", rec(log, "star"), priority=1)
    bus.subscribe("x", rec(log, "x"))
    bus.subscribe("*", rec(log, "star0"))
    assert bus.publish("x") == 3
    assert bus.publish("other") == 2
    assert log == ["star", "x", "star0", "star", "star0"]


def test_unsubscribe_self_during_dispatch():
    bus, log = EventBus(), []
    offs = {}

    def once(t, p):
        log.append("once")
        offs["once"]()

    offs["once"] = bus.subscribe("x", once)
    bus.subscribe("x", rec(log, "after"))
    assert bus.publish("x") == 2
    assert bus.publish("x") == 1
    assert log == ["once", "after", "after"]


def test_subscribe_during_dispatch_waits_for_next_publish():
    bus, log = EventBus(), []

    def adder(t, p):
        log.append("adder")
        bus.subscribe("x", rec(log, "new"))

    bus.subscribe("x", adder)
    bus.publish("x")
    assert log == ["adder"]


def test_errors_collected():
    bus, log = EventBus(), []

    def boom(t, p):
        raise RuntimeError("boom")

    def bad(t, p):
        raise KeyError("bad")

    bus.subscribe("x", boom, priority=2)
    bus.subscribe("x", rec(log, "ok"), priority=1)
    bus.subscribe("x", bad)
    with pytest.raises(busmod.PublishError) as info:
        bus.publish("x")
    assert log == ["ok"]
    assert [type(e) for e in info.value.errors] == [RuntimeError, KeyError]


def test_double_unsubscribe_harmless():
    bus = EventBus()
    off = bus.subscribe("x", lambda t, p: None)
    off()
    off()
    assert bus.publish("x") == 0
