from bus.events import EventBus

__all__ = ["EventBus"]
