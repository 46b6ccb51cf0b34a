"""The ordinary agent shapes as data: one honest ``cmd:`` agent per way a user starts a program.

Each writes a correct ``clamp()`` (in words of its own: a script holding the reference solution's text
is, rightly, inflow of the solution when the traced shell reads it) into ``mathx/ops.py`` of the ``add-clamp`` smoke task and prints
``SHAPE-RAN <name>`` (with what proves the shape, e.g. the pyenv root its shim set), so the test
can tell an agent that ran from one that died at sandbox start.

``Shape.kind`` says how the files are laid out (``tests/sandbox/test_shapes.py`` builds them):

    script   ``body`` is written to ``<where>/<file>`` (mode 0755) and run as ``cmd:<path>``
             (``where``: ``agents`` a folder of the test, ``tmp`` /tmp itself, ``home`` the
             operator's $HOME itself, ``relative`` run as ``cmd:./agents/<file>`` from the cwd)
    interp   ``cmd:<interp> <path>``: the script is an argument (no exec bit)
    venv     a console script in a fresh virtualenv's ``bin/`` (``#!<venv>/bin/python``)
    user     a ``pip install --user`` console script: ``~/.local/bin/<name>`` importing its
             module from ``~/.local/lib/pythonX.Y/site-packages`` of the operator's home
    static   a static C binary built with ``gcc -static``
"""

from __future__ import annotations

from dataclasses import dataclass

CLAMP = '''"""Interpolation and range helpers."""


def lerp(a, b, t):
    """Linear interpolation between ``a`` and ``b`` at ``t`` (0..1)."""
    return a + (b - a) * t


def clamp(value, low, high):
    """Limit ``value`` to the closed interval [low, high]."""
    ordered = low <= high
    if not ordered:
        raise ValueError("the bounds are reversed")
    return low if value < low else high if value > high else value
'''

_SH = """\
echo "SHAPE-RAN {name}"
cat > mathx/ops.py <<'PYEOF'
{clamp}PYEOF
"""

_PY = """\
import os
print("SHAPE-RAN {name}", "pyenv=" + os.environ.get("PYENV_ROOT", "-"),
      "asdf=" + os.environ.get("ASDF_DIR", "-"), flush=True)
open("mathx/ops.py", "w").write({clamp!r})
"""

_NODE = """\
#!/usr/bin/env node
const fs = require("fs");
const {{ execFileSync }} = require("child_process");
fs.writeFileSync("mathx/ops.py", {clamp_json});
const out = execFileSync("python3", ["-c",
  "import os; print('from-python3 pyenv=' + os.environ.get('PYENV_ROOT', '-'))"]).toString();
console.log("SHAPE-RAN {name} " + out.trim());
"""

_C = r"""
#include <stdio.h>
int main(void) {
    FILE *f = fopen("mathx/ops.py", "w");
    if (!f) return 1;
    fputs(%s, f);
    fclose(f);
    puts("SHAPE-RAN %s");
    return 0;
}
"""


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str  # script | interp | venv | user | static (see the module docstring)
    interpreter: str = ""  # the #! line (script, venv), or the program (interp); ``{asdf}``
    # is the fake asdf installation the test builds
    language: str = "sh"  # sh | py | node
    where: str = "agents"  # agents | tmp | home | relative
    proves: str = ""  # a word the marker line must also carry

    def body(self) -> str:
        import json

        if self.language == "sh":
            text = _SH.format(name=self.name, clamp=CLAMP)
        elif self.language == "py":
            text = _PY.format(name=self.name, clamp=CLAMP)
        elif self.language == "node":
            return _NODE.format(name=self.name, clamp_json=json.dumps(CLAMP))
        else:
            raise ValueError(self.language)
        return (f"#!{self.interpreter}\n" if self.kind == "script" else "") + text

    def c_source(self) -> str:
        import json

        return _C % (json.dumps(CLAMP), self.name)


SHAPES = (
    Shape("bin-sh", "script", "/bin/sh"),
    Shape("bin-bash", "script", "/bin/bash"),
    Shape("env-bash", "script", "/usr/bin/env bash"),
    Shape("env-python3-pyenv-shim", "script", "/usr/bin/env python3", "py", proves="pyenv=/"),
    Shape("usr-bin-python3", "script", "/usr/bin/python3", "py"),
    Shape("venv-console-script", "venv", language="py"),
    Shape("pip-user-console-script", "user", language="py", proves="site-packages"),
    Shape("script-in-tmp", "script", "/bin/sh", where="tmp"),
    Shape("script-in-home", "script", "/usr/bin/env python3", "py", where="home",
          proves="pyenv=/"),
    Shape("script-relative-to-cwd", "script", "/bin/bash", where="relative"),
    Shape("cmd-bash-script", "interp", "bash"),
    Shape("cmd-python3-script", "interp", "python3", "py", proves="pyenv=/"),
    Shape("node-shells-out-to-python3", "script", language="node", proves="from-python3 pyenv=/"),
    Shape("static-binary", "static"),
    Shape("cmd-asdf-shim-script", "interp", "{asdf}/shims/python3", "py", proves="asdf=/"),
    Shape("asdf-shim-shebang", "script", "{asdf}/shims/python3", "py", proves="asdf=/"),
)

USER_MODULE = """\
import os


def main():
    print("SHAPE-RAN {name}", "user-site=" + os.path.dirname(__file__), flush=True)
    open("mathx/ops.py", "w").write({clamp!r})
"""
