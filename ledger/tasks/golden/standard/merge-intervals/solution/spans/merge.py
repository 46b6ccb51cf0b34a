"""Union of closed intervals."""


def merge_intervals(intervals):
    """Merge ``(start, end)`` intervals into a sorted list of disjoint intervals."""
    for start, end in intervals:
        if start > end:
            raise ValueError(f"bad interval {(start, end)!r}")
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [tuple(m) for m in merged]
