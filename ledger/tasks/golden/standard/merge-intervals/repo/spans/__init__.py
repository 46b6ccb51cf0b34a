from spans.merge import merge_intervals

__all__ = ["merge_intervals"]
