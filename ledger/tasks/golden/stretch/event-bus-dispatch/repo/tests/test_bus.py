from bus import EventBus


def test_publish_to_subscribers():
    bus, seen = EventBus(), []
    bus.subscribe("a", lambda t, p: seen.append((t, p)))
    assert bus.publish("a", 1) == 1
    assert bus.publish("b", 2) == 0
    assert seen == [("a", 1)]


def test_unsubscribe():
    bus, seen = EventBus(), []
    off = bus.subscribe("a", lambda t, p: seen.append(p))
    off()
    assert bus.publish("a", 1) == 0 and seen == []
