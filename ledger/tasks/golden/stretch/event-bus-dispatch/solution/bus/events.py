"""A publish/subscribe hub."""

import itertools


class PublishError(Exception):
    """One or more handlers raised; ``errors`` lists the exceptions in call order."""

    def __init__(self, errors):
        super().__init__(f"{len(errors)} handler(s) failed")
        self.errors = list(errors)


class EventBus:
    def __init__(self):
        self._subs = {}  # id -> (topic, -priority, order, handler)
        self._ids = itertools.count()

    def subscribe(self, topic, handler, priority=0):
        """Call ``handler(topic, payload)`` for each event on ``topic``; returns unsubscribe()."""
        sub_id = next(self._ids)
        self._subs[sub_id] = (topic, -priority, sub_id, handler)

        def unsubscribe():
            self._subs.pop(sub_id, None)

        return unsubscribe

    def publish(self, topic, payload=None):
        """Call every handler of ``topic`` and of "*"; return how many were called."""
        chosen = sorted(
            (s for s in self._subs.values() if s[0] in (topic, "*")), key=lambda s: (s[1], s[2])
        )
        errors = []
        for _topic, _prio, _order, handler in chosen:
            try:
                handler(topic, payload)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise PublishError(errors)
        return len(chosen)
