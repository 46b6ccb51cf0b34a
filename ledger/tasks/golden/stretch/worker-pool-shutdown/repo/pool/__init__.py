from pool.workers import Pool

__all__ = ["Pool"]
