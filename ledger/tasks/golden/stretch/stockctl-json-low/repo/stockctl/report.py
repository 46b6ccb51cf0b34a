"""Reports over the stock list."""


def text_report(items):
    """One line per item, sorted by SKU, then the total value."""
    lines = []
    total = 0.0
    for item in sorted(items, key=lambda i: i.sku):
        value = item.qty * item.price
        total += value
        lines.append(f"{item.sku}  {item.name:<12} {item.qty:>5} {value:>10.2f}")
    lines.append(f"total {total:.2f}")
    return "\n".join(lines)
