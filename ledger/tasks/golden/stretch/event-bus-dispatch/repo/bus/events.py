"""A publish/subscribe hub."""


class EventBus:
    def __init__(self):
        self._handlers = {}

    def subscribe(self, topic, handler):
        """Call ``handler(topic, payload)`` for each event on ``topic``; returns unsubscribe()."""
        self._handlers.setdefault(topic, []).append(handler)

        def unsubscribe():
            self._handlers[topic].remove(handler)

        return unsubscribe

    def publish(self, topic, payload=None):
        """Call every handler of ``topic``; return how many were called."""
        count = 0
        for handler in self._handlers.get(topic, []):
            handler(topic, payload)
            count += 1
        return count
