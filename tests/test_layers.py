"""The one-way layers of DESIGN.md section 3, checked on the source: pure code imports no I/O."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ledger", "evaluators", "attest", "cli")
# Modules that must stay pure: entries (and values) in, values out.
PURE = [
    *sorted((ROOT / "evaluators").glob("*.py")),
    *sorted((ROOT / "attest").glob("*.py")),
    ROOT / "ledger/journal/codec.py",
    ROOT / "ledger/journal/merkle.py",
    ROOT / "ledger/journal/note.py",
    ROOT / "ledger/journal/tiles.py",
    ROOT / "ledger/argv.py",
    ROOT / "ledger/pathnames.py",
]
IMPURE_MODULES = {"sqlite3", "sqlite_utils", "os", "time", "random", "secrets", "subprocess",
                  "socket", "pathlib", "shutil", "tempfile", "urllib", "http",
                  "requests", "uuid", "ledger.journal.store", "ledger.journal.journal"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _source_files() -> list[Path]:
    out: list[Path] = []
    for pkg in PACKAGES:
        out += [p for p in (ROOT / pkg).rglob("*.py") if "golden" not in p.parts and "corpus" not in p.parts]
    return out


def test_pure_modules_import_no_io() -> None:
    """evaluators/, attest/, codec, merkle, note, tiles: no I/O, clock or randomness."""
    for path in PURE:
        bad = {n for n in _imports(path) if n in IMPURE_MODULES or n.split(".")[0] in IMPURE_MODULES}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
        text = path.read_text(encoding="utf-8")
        for clock in (".now(", ".today(", "utcnow(", "monotonic(", "perf_counter("):
            assert clock not in text, f"{path.relative_to(ROOT)} reads a clock ({clock})"


def test_only_the_store_touches_sqlite() -> None:
    """ledger/journal/store.py is the only module that imports sqlite3 (the journal); the analysis
    export ledger/view/sqlite_export.py the only one that imports sqlite_utils (a copy, written
    once), and it imports no sqlite3."""
    users = sorted(str(p.relative_to(ROOT)) for p in _source_files() if "sqlite3" in _imports(p))
    assert users == ["ledger/journal/store.py"]
    writers = sorted(str(p.relative_to(ROOT)) for p in _source_files()
                     if "sqlite_utils" in _imports(p))
    assert writers == ["ledger/view/sqlite_export.py"]


def test_evaluators_never_import_the_run() -> None:
    """Scores are projections: evaluators/ and attest/ import nothing from the run or the CLI."""
    for path in [*(ROOT / "evaluators").glob("*.py"), *(ROOT / "attest").glob("*.py")]:
        bad = {n for n in _imports(path) if n.startswith(("ledger.run", "cli"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_journal_imports_nothing_above_it() -> None:
    """ledger/journal/ is the ground floor: it imports nothing from attest, evaluators, the run,
    the bench, the tasks or the CLI (human-readable lines are built only in cli/)."""
    above = ("attest", "evaluators", "cli", "ledger.run", "ledger.bench", "ledger.tasks")
    for path in sorted((ROOT / "ledger/journal").rglob("*.py")):
        bad = {n for n in _imports(path) if n in above or n.startswith(tuple(a + "." for a in above))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_run_and_its_executors_import_no_cycle() -> None:
    """The executors never import the coordinator, the plan or the CLI (no import cycle)."""
    for path in sorted((ROOT / "ledger/run/executors").glob("*.py")):
        bad = {n for n in _imports(path)
               if n.startswith(("ledger.run.coordinator", "ledger.run.plan", "ledger.run.attestor", "cli"))}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_one_rfc6962_leaf_hash() -> None:
    """SHA-256(0x00 || bytes) is written once, in ledger/journal/merkle.py; the rest call it."""
    import re

    pattern = re.compile(r'\(b"\\x00" \+')
    users = sorted(str(p.relative_to(ROOT)) for p in _source_files()
                   if pattern.search(p.read_text(encoding="utf-8")))
    assert users == ["ledger/journal/merkle.py"]


def test_attempt_ids_are_parsed_only_by_parse_attempt_id() -> None:
    """No module splits an attempt id by hand: evaluators.fold.parse_attempt_id is the one parser."""
    import re

    by_hand = re.compile(r'attempt.*\.r?split\("/"')
    for path in _source_files():
        if path == ROOT / "evaluators/fold.py":  # where parse_attempt_id lives
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not by_hand.search(line), f"{path.relative_to(ROOT)}:{lineno} splits an attempt id"


def test_one_table_renderer() -> None:
    """Text and Markdown tables are drawn only by cli/table.py (the rest call cli.table.grid)."""
    users = sorted(str(p.relative_to(ROOT)) for p in _source_files()
                   if '"---" for _ in' in p.read_text(encoding="utf-8"))
    assert users == ["cli/table.py"]


def test_one_command_parser() -> None:
    """A command as a person writes it (a string or a list of strings) is made into an argv only
    by ledger/argv.py (``split_command``); tasks, ledger.toml, ``cmd:`` and ``--test-cmd`` call it."""
    users = sorted(str(p.relative_to(ROOT)) for p in _source_files()
                   if "shlex.split(" in p.read_text(encoding="utf-8"))
    assert users == ["ledger/argv.py"]


# --------------------------------------------------------------------------- every floor

# The floors, lowest first: a package imports only packages of its own floor or below, and the
# package graph has no circle. A new package is placed here (the test says so when it is not).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("ledger", "ledger.argv", "ledger.errors", "ledger.log", "ledger.home", "ledger.safefs",
     "ledger.limits", "ledger.endpoints", "ledger.pathnames",
     "ledger.spawn", "ledger.commandenv", "ledger.textbound"),
    ("ledger.journal",),
    ("attest", "evaluators"),
    ("ledger.tasks", "ledger.sandbox", "ledger.agents", "ledger.environments"),
    ("ledger.session", "ledger.verify", "ledger.view", "ledger.publish"),
    ("ledger.run", "ledger.bench"),
    ("cli",),
)
# Edges inside one floor that the design allows (the rest of a floor does not import itself).
SIDEWAYS = {("evaluators", "attest"), ("ledger.agents", "ledger.sandbox"),
            ("ledger.agents", "ledger.tasks"),  # the built-in agents read the task they run
            ("ledger.environments", "ledger.sandbox"), ("ledger.sandbox", "ledger.environments"),
            ("ledger.run", "ledger.bench"), ("ledger.bench", "ledger.run"),
            ("ledger.view", "ledger.verify"), ("ledger.publish", "ledger.verify"),
            ("ledger.session", "ledger.verify")}


def _package(module: str) -> str:
    parts = module.split(".")
    return "ledger." + parts[1] if parts[0] == "ledger" and len(parts) > 1 else parts[0]


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path) -> set[str]:
    """Every product module ``path`` imports, lazily or not (``from ledger import x`` is
    ``ledger.x``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names
                       if node.module in PACKAGES or node.module == "ledger")
    return {m for m in out if m.split(".")[0] in PACKAGES and _is_module(m)}


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel.with_suffix(".py")).exists() or (ROOT / rel / "__init__.py").exists()


def _package_graph() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the modules that import it (for the message)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in _source_files():
        src = _package(_module_of(path))
        for mod in _imported_modules(path):
            dst = _package(mod)
            if dst != src:
                graph.setdefault(src, {}).setdefault(dst, []).append(_module_of(path))
    return graph


def _floor(package: str) -> int:
    for i, floor in enumerate(FLOORS):
        if package in floor:
            return i
    raise AssertionError(f"package {package} has no floor: place it in FLOORS "
                         f"(tests/test_layers.py) and in docs/ARCHITECTURE.md")


def test_every_package_has_a_floor_and_imports_nothing_above_it() -> None:
    """No arrow up: a package imports only from its own floor (where SIDEWAYS allows) or below."""
    bad = []
    for src, targets in sorted(_package_graph().items()):
        for dst, users in sorted(targets.items()):
            above = _floor(dst) > _floor(src)
            sideways = (_floor(dst) == _floor(src) > 0  # the ground's leaf modules may
                        and (src, dst) not in SIDEWAYS)  # import each other (no circle)
            if above or sideways:
                bad.append(f"{src} -> {dst} ({', '.join(sorted(set(users))[:3])})")
    assert not bad, "\n".join(bad)


def test_the_package_graph_has_no_circle() -> None:
    """No two packages import each other, directly or through others."""
    graph = {src: set(targets) for src, targets in _package_graph().items()}
    circles = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                circles.append(" -> ".join([*path, nxt]))
            elif nxt not in path and nxt > path[0]:  # each circle once, from its least package
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    assert not circles, "\n".join(circles)


def test_the_middle_floor_stays_apart() -> None:
    """Issue 21's seams: tasks imports no sandbox, run or agents (a command runner is passed in);
    the sandbox imports no run, agents, tasks or attest; agents import no run."""
    rules = {"ledger.tasks": ("ledger.sandbox", "ledger.run", "ledger.agents"),
             "ledger.sandbox": ("ledger.run", "ledger.agents", "ledger.tasks", "attest"),
             "ledger.agents": ("ledger.run",)}
    graph = _package_graph()
    bad = [f"{src} -> {dst} ({', '.join(sorted(set(graph[src][dst]))[:3])})"
           for src, forbidden in rules.items() for dst in forbidden if dst in graph.get(src, {})]
    assert not bad, "\n".join(bad)
