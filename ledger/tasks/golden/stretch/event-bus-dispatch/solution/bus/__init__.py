from bus.events import EventBus, PublishError

__all__ = ["EventBus", "PublishError"]
