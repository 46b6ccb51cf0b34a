"""Where a hidden test or a completion signal can be mutated (the *sites* of
``attest.canary``), and the text edits that make the mutant copy. Pure: source text in, sites
and byte edits out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_FLIP = {ast.Eq: "!=", ast.NotEq: "==", ast.In: "not in", ast.NotIn: "in", ast.Is: "is not",
         ast.IsNot: "is", ast.Lt: ">=", ast.GtE: "<", ast.Gt: "<=", ast.LtE: ">"}


@dataclass(frozen=True)
class Site:
    """One mutation site: in ``file`` (a hidden test file, or ``signal:<index>``), function
    ``func`` (empty for a signal), of ``kind``; ``key`` names it stably within the file."""

    file: str
    func: str
    kind: str
    key: str



# --------------------------------------------------------------------------- text edits


class _Text:
    """Source text with ast positions (line, UTF-8 column) turned into byte offsets."""

    def __init__(self, text: str) -> None:
        self.raw = text.encode("utf-8")
        self.starts = [0]
        for i, b in enumerate(self.raw):
            if b == 10:
                self.starts.append(i + 1)

    def off(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.off(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.off(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def seg(self, a: int, b: int) -> bytes:
        return self.raw[a:b]


def _apply(raw: bytes, base: int, edits: Sequence[tuple[int, int, bytes]]) -> bytes:
    out = raw
    for a, b, new in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[: a - base] + new + out[b - base:]
    return out


def _mutate_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return value + (value[-1] if value else "x")
    if isinstance(value, bytes):
        return value + (value[-1:] if value else b"x")
    return None


def _literal_text(old: bytes, value: Any) -> bytes | None:
    """The source of ``value``, quoted like ``old`` was where that is simple."""
    if isinstance(value, str) and old[:1] in (b"'", b'"') and not old.startswith(old[:1] * 3):
        q = old[:1].decode()
        if value.isprintable() and "\\" not in value:
            return (q + value.replace(q, "\\" + q) + q).encode("utf-8")
    if isinstance(value, bool | int | float | str | bytes):
        return repr(value).encode("utf-8")
    return None


def _constants(node: ast.AST, calls: bool = True) -> list[ast.Constant] | None:
    """The mutable constants of a literal expression; None when it is not a literal (with
    ``calls``, a call of a name whose arguments are literals counts as one)."""
    if isinstance(node, ast.Constant):
        return [node] if _mutate_value(node.value) is not None else []
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _constants(node.operand, calls)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        parts = [_constants(e, calls) for e in node.elts]
    elif isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return None
        parts = [_constants(v, calls) for v in node.values]  # keys stay: a value is enough
    elif calls and isinstance(node, ast.Call) and not node.keywords and isinstance(
            node.func, ast.Name | ast.Attribute):
        parts = [_constants(a, calls) for a in node.args]
    else:
        return None
    if any(p is None for p in parts):
        return None
    return [c for p in parts for c in (p or [])]


def _const_edit(t: _Text, const: ast.Constant) -> tuple[int, int, bytes] | None:
    a, b = t.span(const)
    new = _literal_text(t.seg(a, b), _mutate_value(const.value))
    return None if new is None else (a, b, new)


def _expected_side(test: ast.expr) -> ast.expr | None:
    """``x == <literal>`` or ``<literal> == x``: the literal side."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    left, right = test.left, test.comparators[0]
    for calls in (False, True):  # a plain literal first: f(1) == [1] changes the [1]
        lc, rc = _constants(left, calls), _constants(right, calls)
        if rc and lc is None:
            return right
        if lc and rc is None:
            return left
        if lc is not None and rc is not None:
            return None
    return None


def _is_raises(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name == "raises"


def _parametrize(dec: ast.expr) -> tuple[list[str], ast.List | ast.Tuple] | None:
    if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)
            and dec.func.attr == "parametrize" and len(dec.args) >= 2):
        return None
    if any(k.arg == "ids" for k in dec.keywords):
        return None
    names_node, cases = dec.args[0], dec.args[1]
    if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
        names = [n.strip() for n in names_node.value.split(",") if n.strip()]
    elif isinstance(names_node, ast.List | ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in names_node.elts):
        names = [e.value for e in names_node.elts]  # type: ignore[attr-defined]
    else:
        return None
    if not isinstance(cases, ast.List | ast.Tuple) or not cases.elts:
        return None
    return names, cases


def _body_stmts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in fn.body:
        out.append(s)
        if isinstance(s, ast.With | ast.AsyncWith):
            out.extend(s.body)
    return out


# --------------------------------------------------------------------------- sites


def _fn_sites(t: _Text, fn: ast.FunctionDef | ast.AsyncFunctionDef
              ) -> list[tuple[str, str, list[tuple[int, int, bytes]]]]:
    """(kind, key, edits) of every site of a test function (edits over the whole file)."""
    out: list[tuple[str, str, list[tuple[int, int, bytes]]]] = []
    stmts = _body_stmts(fn)
    # const
    for s in stmts:
        if isinstance(s, ast.Assert):
            side = _expected_side(s.test)
            for k, const in enumerate(_constants(side) or [] if side is not None else []):
                edit = _const_edit(t, const)
                if edit is not None:
                    out.append(("const", f"const:{s.lineno}:{k}", [edit]))
    # param: the body asserts ... == <parameter>
    asserted = {side.id for s in stmts if isinstance(s, ast.Assert)
                for side in _eq_names(s.test)}
    for d, dec in enumerate(fn.decorator_list):
        found = _parametrize(dec)
        if found is None:
            continue
        names, cases = found
        for p, pname in enumerate(names):
            if pname not in asserted:
                continue
            for c, case in enumerate(cases.elts):
                elem = case if len(names) == 1 else (
                    case.elts[p] if isinstance(case, ast.Tuple) and len(case.elts) == len(names)
                    else None)
                if elem is None:
                    continue
                consts = _constants(elem)
                if not consts:
                    continue
                edit = _const_edit(t, consts[0])
                if edit is None:
                    continue
                ca, cb = t.span(case)
                la, lb = t.span(cases)
                one = _apply(t.seg(ca, cb), ca, [edit])
                if len(names) == 1 and isinstance(cases, ast.Tuple):
                    one += b","
                opener, closer = (b"[", b"]") if isinstance(cases, ast.List) else (b"(", b")")
                out.append(("param", f"param:{d}:{p}:{c}", [(la, lb, opener + one + closer)]))
    # raises: the block without the context manager
    for s in fn.body:
        if isinstance(s, ast.With) and len(s.items) == 1 and _is_raises(s.items[0]):
            edit = _unwrap(t, s)
            if edit is not None:
                out.append(("raises", f"raises:{s.lineno}", [edit]))
    if out:
        return out
    # flip: only where nothing stronger exists
    for s in stmts:
        if not isinstance(s, ast.Assert):
            continue
        test = s.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _FLIP:
            a = t.span(test.left)[1]
            b = t.span(test.comparators[0])[0]
            gap = t.seg(a, b)
            m = re.fullmatch(rb"(\s*)(==|!=|not\s+in|in|is\s+not|is|<=|>=|<|>)(\s*)", gap)
            if m:
                new = m.group(1) + _FLIP[type(test.ops[0])].encode() + m.group(3)
                out.append(("flip", f"flip:{s.lineno}", [(a, b, new)]))
        elif not isinstance(test, ast.Compare):
            a, b = t.span(test)
            out.append(("flip", f"flip:{s.lineno}", [(a, b, b"not (" + t.seg(a, b) + b")")]))
    return out


def _eq_names(test: ast.expr) -> list[ast.Name]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return [n for n in (test.left, test.comparators[0]) if isinstance(n, ast.Name)]
    return []


def _unwrap(t: _Text, s: ast.With) -> tuple[int, int, bytes] | None:
    """Replace the ``with`` statement's lines by its body's, dedented to the ``with``'s column."""
    first = s.body[0]
    shift = first.col_offset - s.col_offset
    if shift <= 0 or first.lineno <= s.lineno:
        return None
    a = t.starts[s.lineno - 1]
    end = t.off(s.end_lineno or s.lineno, s.end_col_offset or 0)
    body = t.raw[t.starts[first.lineno - 1]: end]
    lines = []
    for line in body.split(b"\n"):
        if line.strip() and not line.startswith(b" " * shift):
            return None
        lines.append(line[shift:] if line.strip() else line.strip())
    return (a, end, b"\n".join(lines))


def test_sites(rel: str, text: str) -> list[Site]:
    """Every site of a hidden test file (``rel``: its path inside the hidden tests folder)."""
    return [site for site, _edits, _fn in _file_sites(rel, text)]


def _file_sites(rel: str, text: str) -> list[tuple[Site, list[tuple[int, int, bytes]], Any]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    t = _Text(text)
    out = []
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name.startswith("test"):
            for kind, key, edits in _fn_sites(t, fn):
                out.append((Site(rel, fn.name, kind, f"{fn.name}:{key}"), edits, fn))
    return out


def _signal_code(command: Any) -> str | None:
    if (isinstance(command, Sequence) and not isinstance(command, str) and len(command) == 3
            and str(command[0]).rsplit("/", 1)[-1].startswith("python") and command[1] == "-c"):
        return str(command[2])
    return None


def _signal_sites(index: int, code: str) -> list[tuple[Site, bytes]]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    t = _Text(code)
    out = []
    for s in tree.body:
        if isinstance(s, ast.Assert):
            side = _expected_side(s.test)
            for k, const in enumerate(_constants(side) or [] if side is not None else []):
                edit = _const_edit(t, const)
                if edit is not None:
                    out.append((Site(f"signal:{index}", "", "const", f"const:{s.col_offset}:{k}"),
                                _apply(t.raw, 0, [edit])))
    return out
