"""Greedy word wrapping."""

import re


def _wrap_paragraph(text, width):
    lines, current = [], ""
    for word in text.split():
        while len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines


def wrap(text, width):
    """Lines of at most ``width`` characters, breaking at spaces; "" between paragraphs."""
    if width < 1:
        raise ValueError("width must be at least 1")
    paragraphs = [p for p in re.split(r"\n[ \t]*\n(?:[ \t]*\n)*", text) if p.strip()]
    lines = []
    for i, paragraph in enumerate(paragraphs):
        if i:
            lines.append("")
        lines.extend(_wrap_paragraph(paragraph, width))
    return lines
