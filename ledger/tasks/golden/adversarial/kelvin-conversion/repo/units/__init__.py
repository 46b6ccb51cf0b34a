from units.temperature import convert

__all__ = ["convert"]
