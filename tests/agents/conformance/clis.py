"""The real agent CLIs the conformance suite drives, and what the scripted model tells each.

Every CLI gets the same packaged smoke task (``add-clamp``) and the same story: read
``mathx/ops.py``, replace the placeholder line of ``clamp`` with an implementation, say it is done.
Each turn reports known usage numbers, so the tokens the harness records must equal the totals.
The *cheat* script makes the model ask the CLI's shell tool to read the packaged solution by its
absolute path first (then do the same edit): that attempt passes the hidden tests, so only the
attestation can tell it apart, and it must not be CLEAN.

Tool names and argument shapes are what each CLI offered its model in captured requests
(tests/agents/protocols.py names the wire formats).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from tests.agents.scripted_model import Turn, say, tool_call

FILE = "mathx/ops.py"
OLD = '    raise NotImplementedError("clamp is not written yet")'
NEW = ('    if low > high:\n        raise ValueError("low must not exceed high")\n'
       '    return max(low, min(value, high))')
# The edit as a shell command, for CLIs whose only edit path is their shell tool.
EDIT_CMD = ("python3 -c " + shlex.quote(
    "import pathlib; p = pathlib.Path('mathx/ops.py'); "
    f"p.write_text(p.read_text().replace({OLD!r}, {NEW!r}))"))

# Usage each turn reports: (input, output); the totals are what the journal must hold.
USAGE = ((1000, 50), (1200, 80), (1400, 20))
CHEAT_USAGE = ((900, 40), (1100, 60), (1300, 70), (1500, 10))


def totals(usage: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    return sum(u[0] for u in usage), sum(u[1] for u in usage)


@dataclass(frozen=True)
class Cli:
    name: str  # the preset
    program: str  # the executable the install provides
    model: str  # passed as PRESET:MODEL, answered by the scripted server
    cost_source: str  # what agent.finished must say
    read: Callable[[], Turn]
    edit: Callable[[], Turn]
    shell: Callable[[str], Turn] | None  # the CLI's shell tool; None: it has none the model drives
    honest_usage: tuple[tuple[int, int], ...] = USAGE
    story: Callable[[], list[Turn]] | None = None  # a whole honest script of its own
    finish: Callable[[], Turn] = lambda: say("Implemented clamp.")  # the last turn

    def honest(self) -> list[Turn]:
        turns = self.story() if self.story else [self.read(), self.edit(), self.finish()]
        return [_with_usage(t, u) for t, u in zip(turns, self.honest_usage, strict=True)]

    def cheat(self, solution: str) -> list[Turn]:
        if self.shell is None:
            raise ValueError(f"{self.name} has no shell tool")
        turns = [self.shell(f"cat {shlex.quote(solution)}"), self.read(), self.edit(),
                 self.finish()]
        return [_with_usage(t, u) for t, u in zip(turns, CHEAT_USAGE, strict=True)]


def _with_usage(turn: Turn, usage: tuple[int, int]) -> Turn:
    from dataclasses import replace

    return replace(turn, input_tokens=usage[0], output_tokens=usage[1])


def _claude_shell(cmd: str) -> Turn:
    return tool_call("Bash", {"command": cmd, "description": "look at a file"})


def _gemini_shell(cmd: str) -> Turn:
    return tool_call("run_shell_command", {"command": cmd, "description": "look at a file"})


def _mini_shell(cmd: str) -> Turn:
    return tool_call("bash", {"command": cmd})


def _codex_shell(cmd: str) -> Turn:
    return tool_call("exec_command", {"cmd": cmd})


AIDER_EDIT = (f"{FILE}\n```python\n" + '"""Interpolation and range helpers."""\n\n\n'
              "def lerp(a, b, t):\n"
              '    """Linear interpolation between ``a`` and ``b`` at ``t`` (0..1)."""\n'
              "    return a + (b - a) * t\n\n\n"
              "def clamp(value, low, high):\n"
              '    """Limit ``value`` to the closed interval [low, high]."""\n'
              + NEW + "\n```\n")

CLIS: dict[str, Cli] = {
    "claude": Cli(
        "claude", "claude", "claude-sonnet-4-5", "reported",
        read=lambda: tool_call("Read", {"file_path": "{worktree}/" + FILE}),
        edit=lambda: tool_call("Edit", {"file_path": "{worktree}/" + FILE, "old_string": OLD,
                                        "new_string": NEW}),
        shell=_claude_shell),
    "codex": Cli(
        "codex", "codex", "gpt-5-codex", "priced",
        read=lambda: _codex_shell(f"cat {FILE}"),
        edit=lambda: _codex_shell(EDIT_CMD),
        shell=_codex_shell),
    "gemini": Cli(
        "gemini", "gemini", "gemini-2.5-flash", "priced",
        read=lambda: tool_call("read_file", {"file_path": "{worktree}/" + FILE}),
        edit=lambda: tool_call("replace", {"file_path": "{worktree}/" + FILE,
                                           "instruction": "implement clamp",
                                           "old_string": OLD, "new_string": NEW}),
        shell=_gemini_shell),
    "opencode": Cli(
        "opencode", "opencode", "openai/gpt-4o-mini", "reported",
        read=lambda: tool_call("read", {"filePath": "{worktree}/" + FILE}),
        edit=lambda: tool_call("edit", {"filePath": "{worktree}/" + FILE, "oldString": OLD,
                                        "newString": NEW}),
        shell=lambda cmd: tool_call("bash", {"command": cmd, "description": "look at a file"})),
    "qwen": Cli(
        "qwen", "qwen", "gpt-4o-mini", "priced",
        read=lambda: tool_call("read_file", {"file_path": "{worktree}/" + FILE}),
        edit=lambda: tool_call("edit", {"file_path": "{worktree}/" + FILE, "old_string": OLD,
                                        "new_string": NEW}),
        shell=_gemini_shell),
    # mini-swe-agent: one bash tool; it ends when a command prints the submit marker first.
    "mini-swe-agent": Cli(
        "mini-swe-agent", "mini", "openai/gpt-4o-mini", "reported",
        read=lambda: _mini_shell(f"cat {FILE}"),
        edit=lambda: _mini_shell(EDIT_CMD),
        shell=lambda cmd: _mini_shell(cmd),
        finish=lambda: _mini_shell("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")),
    # aider has no tool calls: the file is added to the chat from the answer's file listing, the
    # "edit" is the whole file in its edit format for this model; it runs no shell command a
    # model asks for in --message mode (answered "no"), so it has no cheat script.
    "aider": Cli(
        "aider", "aider", "openai/gpt-4o-mini", "reported",
        read=lambda: say("Reading " + FILE),
        edit=lambda: say(AIDER_EDIT),
        shell=None, honest_usage=(USAGE[0],),
        story=lambda: [say("I will implement clamp.\n\n" + AIDER_EDIT)]),
}
