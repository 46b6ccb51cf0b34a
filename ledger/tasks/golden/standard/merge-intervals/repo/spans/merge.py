"""Union of closed intervals."""


def merge_intervals(intervals):
    """Merge ``(start, end)`` intervals into a sorted list of disjoint intervals."""
    merged = []
    for start, end in intervals:
        if start > end:
            raise ValueError(f"bad interval {(start, end)!r}")
        if merged and start < merged[-1][1]:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    return [tuple(m) for m in merged]
