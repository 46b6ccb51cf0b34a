"""What of the host a sandboxed program needs, resolved the way the system resolves it.

This module is the one place that knows host paths: the system folders and their merged-/usr
links, the folders too wide to show, how a program reaches its installation, what of the harness
a sandbox may read (its interpreter, its package, its pytest reporter) and what none may show
(the task folder, the packaged golden tasks, the ledger home).

    system_binds()          the system folders bound read-only, the top-level links recreated
    install_tree(prog)      what ``prog`` needs read-only: its venv (and base), npm prefix,
                            launcher installation, or own folder (the file alone where that folder
                            is too wide or the operator's home); then the same for its ``#!``
                            interpreter (``#!/usr/bin/env X`` resolved through ``PATH``)
    launcher_root(path)     the installation behind a shim or launcher: pyenv (``libexec/pyenv``),
                            asdf, nvm (the node version), conda (``conda-meta``), Homebrew
                            (``Cellar``), a pip ``--user`` script in the user base's ``bin``
                            (its ``lib/pythonX.Y/site-packages`` only)
    user_base_of(progs)     the Python user base a program or its ``#!`` chain lies in (the agent
                            then gets ``PYTHONUSERBASE``: its fresh HOME hides ``~/.local``)
    path_trees(PATH)        the folders of ``PATH`` and the installation behind each shim folder
    canonical_binds(paths)  readable paths as bwrap can bind them: a path that is, or lies under,
                            a recreated system link becomes its real path, or is dropped when a
                            bound system folder holds it; a path below another is dropped
    interpreter_paths()     the harness interpreter's installation (as given and resolved)
    harness_package_dir()   the ``ledger`` package (shown only to agents that run harness code)
    packaged_tasks_dir()    the golden tasks shipped inside the package (always hidden)
    hidden_paths(root, x)   what no sandbox may show: a task folder, the packaged tasks, ``x``
    outside_system(cmds)    the absolute programs of command lines that live outside the system
                            folders (an imported task's virtualenv interpreter)

A bind keeps its host path (the trace, the scope and the harness mean one file by one name), so
a path whose bind would land on a link the sandbox itself made (``/bin`` on merged /usr) is the
one case where the real path replaces the given one: inside, the recreated link resolves to it.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable, Sequence

from ledger.pathnames import under

# The system: read-only when it is a folder, recreated when it is a symlink (merged /usr).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Folders whose presence in a bind would expose the whole host.
TOO_WIDE = frozenset({"/", "/home", "/root", "/tmp", "/var", "/opt", "/srv", "/mnt", "/media",
                      "/run", "/proc", "/sys", "/dev"})
_MAX_LINKS = 40
_MAX_SHEBANG_DEPTH = 3


def norm(path: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def real_home() -> str:
    """The operator's home folder (never shown whole to a sandbox)."""
    return norm(os.path.realpath(os.path.expanduser("~")))


# --------------------------------------------------------------------------- system


def system_binds() -> tuple[list[str], list[tuple[str, str]]]:
    """(read-only folders, symlinks) for the system paths present on this host."""
    folders: list[str] = []
    links: list[tuple[str, str]] = []
    for p in SYSTEM_PATHS:
        if os.path.islink(p):
            links.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            folders.append(p)
    return folders, links


def system_folders() -> list[str]:
    return system_binds()[0]


def _through_system_link(path: str, links: Sequence[str]) -> bool:
    return any(under(path, link) for link in links)


def canonical_binds(paths: Iterable[str], *, inside: Sequence[str] = ()) -> list[str]:
    """``paths`` as read-only binds: existing, normalised; a path that is or lies under a
    recreated system link replaced by its real path; dropped when a system folder, one of
    ``inside`` (the writable folders) or another path of the list already shows it."""
    folders, links = system_binds()
    link_paths = [link for link, _target in links]
    out: set[str] = set()
    for p in paths:
        if not p or not p.startswith("/"):
            continue
        p = norm(p)
        if not os.path.exists(p):
            continue
        if _through_system_link(p, link_paths):
            p = norm(os.path.realpath(p))
            if not os.path.exists(p):
                continue
        if any(under(p, s) for s in folders) or any(under(p, w) for w in inside):
            continue
        out.add(p)
    kept: list[str] = []
    for p in sorted(out):
        if not any(under(p, o) for o in kept):
            kept.append(p)
    return kept


# --------------------------------------------------------------------------- install trees


def _venv_root(path: str) -> str | None:
    """The virtualenv holding ``path`` (a folder with ``pyvenv.cfg``), if any."""
    cur = os.path.dirname(path)
    while cur not in ("", "/"):
        if os.path.isfile(os.path.join(cur, "pyvenv.cfg")):
            return cur
        cur = os.path.dirname(cur)
    return None


def _venv_home(venv: str) -> str | None:
    """The base installation of a virtualenv (``home = .../bin`` in ``pyvenv.cfg``)."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8", errors="replace") as fh:
            text = fh.read(65536)
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip().startswith("/"):
            return os.path.dirname(norm(os.path.realpath(value.strip())))
    return None


def _node_prefix(path: str) -> str | None:
    """The npm prefix or package root of a program under ``node_modules``."""
    parts = path.split("/")
    if "node_modules" not in parts:
        return None
    i = parts.index("node_modules")
    root = "/".join(parts[:i]) or "/"
    # <prefix>/lib/node_modules/... -> <prefix>
    prefix = os.path.dirname(root) if os.path.basename(root) == "lib" else root
    if prefix not in TOO_WIDE:
        return prefix
    # Reached through a merged-/usr link (/bin/x -> ../lib/node_modules/...), the prefix is "/":
    # show the package alone (node_modules/<name> or node_modules/@scope/<name>).
    width = 3 if len(parts) > i + 2 and parts[i + 1].startswith("@") else 2
    return "/".join(parts[:i + width])


def _ancestors(path: str) -> list[str]:
    out = []
    cur = os.path.dirname(path)
    while cur not in ("", "/"):
        out.append(cur)
        cur = os.path.dirname(cur)
    return out


def _usable_root(root: str) -> bool:
    """A launcher installation that may be shown: not a whole-host folder, not the home itself
    nor one of its ancestors."""
    home = real_home()
    return root not in TOO_WIDE and not under(home, root)


def launcher_root(path: str) -> list[str]:
    """The installation behind a shim or launcher at ``path`` (a file or a ``PATH`` folder):
    what the shim execs must be readable inside, and nothing else of the home it lives in."""
    path = norm(path)
    for anc in _ancestors(path + "/x") if os.path.isdir(path) else _ancestors(path):
        if os.path.isfile(os.path.join(anc, "libexec", "pyenv")):  # pyenv: shims/, bin/pyenv
            return [anc] if _usable_root(anc) else []
        if os.path.isdir(os.path.join(anc, "shims")) and (
                os.path.isfile(os.path.join(anc, "bin", "asdf"))
                or os.path.isfile(os.path.join(anc, "asdf.sh"))
                or os.path.isdir(os.path.join(anc, "installs"))):  # asdf: shims/, installs/
            return [anc] if _usable_root(anc) else []
        if os.path.isfile(os.path.join(anc, "nvm.sh")):  # nvm: versions/node/vX/bin/node
            rel = os.path.relpath(path, anc).split("/")
            if len(rel) >= 3 and rel[0] == "versions":
                version = os.path.join(anc, *rel[:3])
                return [version] if _usable_root(version) else []
            return [anc] if _usable_root(anc) else []
        if os.path.isdir(os.path.join(anc, "conda-meta")):  # a conda environment (or base)
            return [anc] if _usable_root(anc) else []
        if os.path.isdir(os.path.join(anc, "Cellar")) and \
                os.path.isdir(os.path.join(anc, "Homebrew")):  # Homebrew's prefix
            return [anc] if _usable_root(anc) else []
    # A pip --user script: <user base>/bin/x; its packages, and only those, are readable.
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    base = _user_base_holding(folder)
    if base is not None:
        return user_site_dirs(base)
    return []


def user_base() -> str:
    """The Python user base ``pip install --user`` fills: ``$PYTHONUSERBASE``, else the
    operator's ``~/.local``."""
    given = os.environ.get("PYTHONUSERBASE", "")
    return norm(given) if given.startswith("/") else os.path.join(real_home(), ".local")


def _user_base_holding(folder: str) -> str | None:
    """The user base whose ``bin`` is ``folder`` (``user_base()``, or any ``.../.local``)."""
    for base in (user_base(), os.path.dirname(folder) if folder.endswith("/.local/bin") else ""):
        if base and base not in TOO_WIDE and folder == os.path.join(base, "bin"):
            return base
    return None


def user_site_dirs(base: str) -> list[str]:
    """The ``lib/pythonX.Y/site-packages`` folders of a user base (never the rest of it)."""
    found = glob.glob(os.path.join(glob.escape(base), "lib", "python3*", "site-packages"))
    return sorted(p for p in found if os.path.isdir(p))


def user_base_of(programs: Sequence[str], path_env: str) -> str | None:
    """The user base one of ``programs`` (or a program of its ``#!`` interpreter chain, or a link
    on the way) lies in: its ``bin`` holds the program. None for every other program."""
    for prog in programs:
        for candidate in program_chain(prog, path_env):
            base = _user_base_holding(os.path.dirname(candidate))
            if base is not None:
                return base
    return None


def shebang(path: str) -> list[str]:
    """The words of ``path``'s ``#!`` line (``[]`` when it has none or cannot be read)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def shebang_program(words: Sequence[str]) -> str | None:
    """The program a ``#!`` line runs: ``#!/usr/bin/env [-S] [VAR=x] X`` is X."""
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return words[0]
    for w in words[1:]:
        if w.startswith("-") or "=" in w:
            continue
        return w
    return None


def which(name: str, path_env: str) -> str | None:
    for folder in path_env.split(os.pathsep):
        if not folder:
            continue
        cand = os.path.join(folder, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def link_chain(path: str) -> list[str]:
    """``path`` and every link it goes through to its target (``bin/x -> ../lib/x -> ...``)."""
    hops = [norm(path)]
    while os.path.islink(hops[-1]) and len(hops) < _MAX_LINKS:
        hops.append(norm(os.path.join(os.path.dirname(hops[-1]), os.readlink(hops[-1]))))
    return list(dict.fromkeys([*hops, norm(os.path.realpath(path))]))


def _own_folder(path: str) -> str:
    """A program's own folder, or the program file alone when its folder is too wide to show
    (``/tmp``, ``/``) or is the operator's home (or an ancestor of it)."""
    folder = os.path.dirname(path)
    if folder in TOO_WIDE or under(real_home(), folder):
        return path
    return folder


def program_chain(program: str, path_env: str, _depth: int = 0) -> list[str]:
    """Every file running ``program`` goes through: the program found (``PATH``), each link to
    its target, then the same for its ``#!`` interpreter (``#!/usr/bin/env X`` through
    ``PATH``), a few levels deep."""
    found = program if "/" in program else which(program, path_env)
    if found is None:
        return []
    out = link_chain(found)
    if _depth < _MAX_SHEBANG_DEPTH:
        interp = shebang_program(shebang(norm(os.path.realpath(found))))
        if interp:
            out += program_chain(interp, path_env, _depth + 1)
    return out


def install_tree(program: str, path_env: str) -> list[str]:
    """The paths ``program`` needs read-only (see the module docstring), unresolved: the
    policy passes them through ``canonical_binds``."""
    out: list[str] = []
    for candidate in program_chain(program, path_env):
        launcher = launcher_root(candidate)
        if launcher:
            out += launcher
            out.append(_own_folder(candidate))
            continue
        tree = _venv_root(candidate)
        if tree is not None:
            out.append(tree)
            home = _venv_home(tree)
            if home:
                out.append(home)
            continue
        tree = _node_prefix(candidate)
        out.append(tree if tree else _own_folder(candidate))
    return out


def path_trees(path_env: str, hidden: Sequence[str]) -> list[str]:
    """The folders of ``PATH`` a sandbox shows read-only, so that commands resolve inside as
    outside, and the installation behind each shim folder among them (pyenv's ``shims/`` brings
    the pyenv root): absolute, existing, not a whole-host folder, not holding or inside a hidden
    path."""
    out: list[str] = []

    def ok(p: str) -> bool:
        return p not in TOO_WIDE and not any(under(p, h) or under(h, p) for h in hidden)

    for entry in path_env.split(os.pathsep):
        if not entry.startswith("/") or not os.path.isdir(entry):
            continue
        real = norm(os.path.realpath(entry))
        if not ok(real):
            continue
        out.append(real)
        out += [r for r in launcher_root(real) if ok(r)]
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------- the harness


def interpreter_paths() -> list[str]:
    """The harness interpreter's installation (as given and resolved)."""
    out: list[str] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        out += [p, os.path.realpath(p)]
    return [p for p in dict.fromkeys(out) if p.startswith("/") and p != "/"]


def harness_package_dir() -> str:
    """The ``ledger`` package folder (this module lives in ``ledger/sandbox/``)."""
    return os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def packaged_tasks_dir() -> str:
    """The golden tasks shipped in the package (``ledger/tasks/golden``): hidden from every box."""
    return os.path.join(harness_package_dir(), "tasks", "golden")


def hidden_paths(task_root: str | os.PathLike[str], extra: Iterable[str] = ()) -> list[str]:
    """What no sandbox may show: the task folder, the packaged tasks, ``extra`` (ledger home)."""
    out = [os.path.realpath(task_root), packaged_tasks_dir()]
    out += [os.path.realpath(p) for p in extra if isinstance(p, str) and p.startswith("/")]
    return list(dict.fromkeys(out))


SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib")


def outside_system(commands: Iterable[Sequence[str] | None]) -> list[str]:
    """The first words of ``commands`` that are absolute programs outside the system folders
    (an imported task's virtualenv interpreter): a box must show their installation tree."""
    return [c[0] for c in commands
            if c and c[0].startswith("/") and not c[0].startswith(SYSTEM_PREFIXES)]


__all__ = ["SYSTEM_PATHS", "SYSTEM_PREFIXES", "harness_package_dir", "hidden_paths",
           "interpreter_paths", "outside_system", "packaged_tasks_dir", "TOO_WIDE", "canonical_binds", "install_tree", "launcher_root",
           "link_chain", "norm", "path_trees", "program_chain", "real_home", "shebang",
           "shebang_program", "system_binds", "system_folders", "under", "user_base",
           "user_base_of", "user_site_dirs", "which"]
