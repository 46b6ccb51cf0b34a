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


def report_rows(items):
    """The report as a list of dicts, sorted by SKU."""
    return [
        {"sku": i.sku, "name": i.name, "qty": i.qty, "value": round(i.qty * i.price, 2)}
        for i in sorted(items, key=lambda i: i.sku)
    ]


def low_stock(items, threshold=5):
    """Items with qty below ``threshold``, by qty then SKU."""
    return sorted((i for i in items if i.qty < threshold), key=lambda i: (i.qty, i.sku))
