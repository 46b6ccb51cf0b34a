"""What a bench run asks: the task text, its hash and snapshot, and the prompts of every round.

    task_from_prompt(text) | task_from_files(paths) | task_from_diff(ref) | corpus_task()
    task.task_hash         SHA-256 (hex) of the task text
    task.snapshot()        the first 30,000 characters (None with --no-snapshot)
    task.agent_prompt()    the text plus the answer format (the corpus prompt carries its own)
    tests_prompt / review_prompt / revise_prompt    the later rounds

The task text is what the hash covers; the answer-format paragraph added for user tasks is fixed
for a given version of this module, so the same text always gives the same prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluators.bench_judge import strip_self_eval
from evaluators.responses import code_files, render_files
from ledger.errors import MalformedInput, NotFound, UsageError

SNAPSHOT_LIMIT = 30_000
MAX_TASK_CHARS = 100_000  # agent CLIs take the prompt as one argument (Linux: 128 KiB)
MAX_FILE_BYTES = 2_000_000
CORPUS_DIR = Path(__file__).resolve().parent / "corpus" / "v1"
SOURCES = ("user", "files", "diff", "corpus")

ANSWER_FORMAT = """

---

## Answer format (benchmark)

Answer in one message; do not create or edit files on disk. Put every file you write in its own
fenced code block whose first line is a comment naming the file (`# FILE: path/name.py`, or
`// FILE: path/name.ts` in languages with `//` comments). End your answer with one line
`SELF_EVAL_SUMMARY: N/20`, your own score of your answer: completeness + accuracy +
actionability + no_hallucinations, each 0-5.
"""

TESTS_PROMPT_GENERIC = """# Benchmark task: write tests

You are taking part in a benchmark. Write tests for the code below (your own answer to the
previous round). Do not create or edit files on disk: answer in one message. Your tests are
executed in a folder that holds exactly the files below and your test files, so import the code
by its file names. For Python use pytest only (no plugins; `asyncio.run(...)` for async code).

## The task

{{TASK}}

## The code to test

{{ROUND_1_CODE}}

## Required response format

One fenced code block per test file, whose first line names the file (`# FILE: test_name.py`),
then a TEST_EVAL_SUMMARY block at the very end:

```
TEST_EVAL_SUMMARY
File count: <number of test files written>
Test count: <number of test functions>
Edge cases covered: <the 3 most important edge cases you tested>
```
"""

REVIEW_PROMPT = """You are reviewing another agent's answer to a coding task in a benchmark.
Find concrete defects: wrong logic, requirements that are missing, edge cases not handled,
invented APIs, stubs or placeholders{what}. List each defect with the change it needs; be
specific and brief, and do not rewrite the whole answer.

TASK:
{task}

ANSWER UNDER REVIEW:
{answer}
"""

REVISE_PROMPT = """Your answer to the task below was reviewed by other agents of a benchmark.
Revise it where a critique is right and ignore critiques that are wrong. Give the complete revised
answer in the same format as before{tail}.

TASK:
{task}

YOUR ANSWER:
{answer}

CRITIQUES:
{critiques}
"""


@dataclass(frozen=True)
class Corpus:
    """The packaged corpus: one prompt covering several tasks, each with its hidden checks."""

    root: Path
    version: str
    language: str
    code_prompt: str
    tests_prompt: str
    tasks: tuple[dict[str, Any], ...]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(str(t["file"]) for t in self.tasks)

    def check_paths(self) -> list[Path]:
        return [self.root / str(t["checks"]) for t in self.tasks]


def load_corpus(root: Path = CORPUS_DIR) -> Corpus:
    """The corpus at ``root`` (``corpus.json`` plus the prompts and checks it names)."""
    try:
        meta = json.loads((root / "corpus.json").read_text(encoding="utf-8"))
        code = (root / meta["code_prompt"]).read_text(encoding="utf-8")
        tests = (root / meta["tests_prompt"]).read_text(encoding="utf-8")
        tasks = tuple(meta["tasks"])
        for t in tasks:
            if not (root / t["checks"]).is_file() or not t.get("file"):
                raise KeyError(t.get("checks"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MalformedInput(f"the bench corpus at {root} is incomplete: {exc}") from None
    if len(tasks) < 2:
        raise MalformedInput(f"the bench corpus at {root} must hold at least two tasks")
    return Corpus(root, str(meta["version"]), str(meta.get("language", "python")), code, tests,
                  tasks)


@dataclass(frozen=True)
class BenchTask:
    source: str  # "user" | "files" | "diff" | "corpus"
    text: str
    detail: dict[str, Any] = field(default_factory=dict)
    corpus: Corpus | None = None

    @property
    def mode(self) -> str:
        return "corpus" if self.source == "corpus" else "default"

    @property
    def task_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def title(self) -> str:
        if self.source == "corpus":
            return "corpus tasks"
        first = " ".join(self.text.split())
        return first[:60]

    def snapshot(self, enabled: bool = True) -> str | None:
        return self.text[:SNAPSHOT_LIMIT] if enabled else None

    def agent_prompt(self) -> str:
        if self.source == "corpus":
            return self.text
        return self.text.rstrip() + "\n" + ANSWER_FORMAT

    def tests_prompt(self, code_answer: str) -> str:
        files = code_files(code_answer)
        code = render_files(files) if files else strip_self_eval(code_answer)
        if self.corpus is not None:
            return self.corpus.tests_prompt.replace("{{ROUND_1_CODE}}", code)
        return TESTS_PROMPT_GENERIC.replace("{{TASK}}", self.text).replace("{{ROUND_1_CODE}}", code)

    def review_prompt(self, answer: str, round_name: str) -> str:
        what = ", and tests that would pass on wrong code" if round_name.startswith("tests") else ""
        task = self.text if not round_name.startswith("tests") else self.tests_prompt("")
        return REVIEW_PROMPT.format(what=what, task=task, answer=strip_self_eval(answer))

    def revise_prompt(self, answer: str, critiques: list[str], round_name: str) -> str:
        tail = (", including the final TEST_EVAL_SUMMARY block" if round_name.startswith("tests")
                else ", including the final SELF_EVAL_SUMMARY")
        task = self.agent_prompt() if not round_name.startswith("tests") else self.tests_prompt("")
        body = "\n\n".join(f"--- critique {i} ---\n{c.strip()}" for i, c in enumerate(critiques, 1))
        return REVISE_PROMPT.format(tail=tail, task=task, answer=answer, critiques=body)


def _check_size(text: str, what: str) -> str:
    if not text.strip():
        raise UsageError(f"{what} is empty: there is nothing to benchmark")
    if len(text) > MAX_TASK_CHARS:
        raise UsageError(f"{what} has {len(text)} characters; the limit is {MAX_TASK_CHARS} "
                         "(agent CLIs take the prompt as a single argument)")
    return text


def task_from_prompt(text: str) -> BenchTask:
    return BenchTask("user", _check_size(text, "the prompt"))


def _fence(content: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", content)), default=2)
    return "`" * max(3, longest + 1)


def task_from_files(paths: list[str], cwd: Path | None = None) -> BenchTask:
    """The task is the files' contents (the instructions they hold, or code to review)."""
    base = cwd or Path.cwd()
    names: list[str] = []
    for p in paths:
        names.extend(x.strip() for x in re.split(r"[\n,]", p) if x.strip())
    if not names:
        raise UsageError("--files needs at least one path")
    parts = ["The task input is the following file(s). Do what they ask; where they hold code "
             "rather than instructions, review it and answer with a corrected, complete version."]
    for name in names:
        path = (base / name) if not Path(name).is_absolute() else Path(name)
        if not path.is_file():
            raise NotFound(f"--files: {name} is not a file")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"--files: {name} is larger than {MAX_FILE_BYTES} bytes")
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"--files: {name} is not UTF-8 text") from None
        fence = _fence(content)
        parts.append(f"## File: {name}\n\n{fence}\n{content.rstrip()}\n{fence}")
    return BenchTask("files", _check_size("\n\n".join(parts) + "\n", "the files"),
                     {"files": names})


def task_from_diff(ref: str = "HEAD~1", cwd: Path | None = None) -> BenchTask:
    """The task is the change ``git diff REF`` shows (the seed's default input)."""
    if ref.startswith("-"):
        raise UsageError(f"--diff: {ref!r} is not a git revision")
    try:
        proc = subprocess.run(["git", "diff", "--no-color", "--no-ext-diff", ref, "--"],
                              cwd=cwd or Path.cwd(), capture_output=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--diff: cannot run git: {exc}") from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UsageError(f"--diff {ref}: git diff failed: {err[0] if err else proc.returncode} "
                         "(give a prompt with --prompt, or run inside a git repository)")
    diff = proc.stdout.decode("utf-8", "replace")
    if not diff.strip():
        raise UsageError(f"--diff {ref}: the diff is empty; give a prompt with --prompt or --files")
    fence = _fence(diff)
    text = (f"The task input is the code change below (`git diff {ref}`). Review it: find its "
            "defects and answer with corrected, complete versions of the files it changes.\n\n"
            f"{fence}diff\n{diff.rstrip()}\n{fence}\n")
    return BenchTask("diff", _check_size(text, f"the diff {ref}"), {"ref": ref})


def corpus_task(root: Path = CORPUS_DIR) -> BenchTask:
    corpus = load_corpus(root)
    return BenchTask("corpus", corpus.code_prompt,
                     {"corpus_version": corpus.version, "tasks": [t["id"] for t in corpus.tasks]},
                     corpus)


def task_from_snapshot(source: str, snapshot: str, replay_of: str) -> BenchTask:
    """The task of an earlier run, rebuilt from its stored snapshot (``--replay-last``)."""
    if source == "corpus":
        return corpus_task()
    return BenchTask(source if source in SOURCES else "user", _check_size(snapshot, "the snapshot"),
                     {"replay_of": replay_of})


__all__ = ["ANSWER_FORMAT", "CORPUS_DIR", "SNAPSHOT_LIMIT", "BenchTask", "Corpus", "corpus_task",
           "load_corpus", "task_from_diff", "task_from_files", "task_from_prompt",
           "task_from_snapshot"]
