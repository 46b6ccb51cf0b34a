from retrying.retry import retry

__all__ = ["retry"]
