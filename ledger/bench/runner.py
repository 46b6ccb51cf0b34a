"""Run a bench: dispatch one task to several agents in parallel, run the extra rounds, judge, and
journal every step; the leaderboard is then a projection of those entries.

    run_bench(home, task, BenchOptions(...), progress=print) -> BenchResult

Steps, each journaled (kinds in docs/bench.md): ``run.started`` + ``bench.started`` -> the code
round (``bench.response``, ``bench.activity``) -> corpus checks (``bench.check``) -> review rounds
(``bench.review``, revised ``bench.response``) -> tests round (``bench.response``, executed:
``bench.tests``) -> static checks (``bench.static``) -> judging (``bench.judge_prompt``,
``bench.judge_raw``, ``bench.verdict``; a reversed-order pass with ``swap_check``) ->
``view.recorded`` (the leaderboard) -> ``bench.finished`` -> ``run.finished`` -> a signed
checkpoint. Agents run in worker threads (each a bounded process group); only this thread
appends to the journal, through the bench's ``ledger.session.Session`` (the one writer, no
attestation policy: a bench journals no commitment), and the leaderboard is folded as the
entries are appended.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evaluators import bench_judge as jd
from evaluators.facts import STUB_MARK, TODO_MARK
from evaluators.leaderboard import (
    BENCH_EVALUATOR,
    BENCH_VERSION,
    fold_leaderboard,
    leaderboard_view,
    new_leaderboard_state,
)
from evaluators.responses import code_files, extract_answer, language_of, render_files
from ledger.bench.checks import corpus_check, discover_tools, run_agent_tests, static_checks
from ledger.bench.inputs import BenchTask
from ledger.errors import LedgerError, NothingToRun, UsageError
from ledger.home import LedgerHome
from ledger.journal.journal import Journal
from ledger.run.contracts import AttemptContext, Usage
from ledger.session import JournalWriter, Session, attempt_id, new_run_id

TEXT_LIMIT = 200_000  # characters of an answer kept in the journal (head + tail)
PROMPT_LIMIT = 200_000
STDOUT_LIMIT = 64 * 1024
OUTPUT_LIMIT = 8 * 1024 * 1024  # bytes of agent stdout read (the answer is in it)
ACTIVITY_LIMIT = 200  # transcript events kept per call
COLLECT_MAX_FILES = 50
COLLECT_MAX_BYTES = 200_000
MAX_ARG_BYTES = 120_000  # a prompt travels as one argv element (Linux limit 128 KiB)
DEFAULT_TIMEOUT_S = 600.0
JUDGE_CANDIDATES = ("claude", "codex", "gemini", "cursor-agent")
NOT_STORED = "[task text not stored: --no-snapshot]"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    agents: tuple[str, ...] = ()  # agent specs; empty: every agent CLI found on PATH
    judges: tuple[str, ...] = ()  # judge specs; empty: chosen by the family rule; "offline"
    with_tests: bool = False
    with_review: bool = False
    with_test_review: bool = False
    with_static: bool = False
    swap_check: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    check_timeout_s: float = 300.0
    no_snapshot: bool = False
    seed: int | None = None
    parallel: int | None = None
    project: str | None = None
    tools: Mapping[str, str | None] | None = None  # static-check tools; None: discover
    pricing_file: Path | None = None


@dataclass
class BenchResult:
    run_id: str
    view: dict[str, Any]
    verdict: str
    exit_code: int
    notes: list[str] = field(default_factory=list)


@dataclass
class CallResult:
    """One agent (or judge) call, ready to be journaled."""

    agent: str
    round: str
    status: str  # "ok" | "timeout" | "failed"
    error: str | None
    exit_code: int | None
    signal: int | None
    wall_s: float
    text: str
    stdout: str
    stderr: str
    tokens_in: int | None
    tokens_out: int | None
    tokens_source: str  # "reported" | "estimated"
    cost_usd: float | None
    cost_source: str
    model: str | None
    format: str
    files_collected: list[str]
    orphans: int
    events: list[tuple[str, dict[str, Any]]]
    prompt_sha256: str
    prompt_chars: int

    def record(self) -> dict[str, Any]:
        text, cut, total = bound(self.text, TEXT_LIMIT)
        return {
            "agent": self.agent, "round": self.round, "status": self.status, "error": self.error,
            "exit_code": self.exit_code, "signal": self.signal, "wall_s": round(self.wall_s, 6),
            "timed_out": self.status == "timeout", "text": text, "text_truncated": cut,
            "text_chars": total, "stderr": bound(self.stderr, 4000, head=0)[0],
            "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
            "tokens_source": self.tokens_source, "cost_usd": self.cost_usd,
            "cost_source": self.cost_source, "model": self.model, "format": self.format,
            "files_collected": self.files_collected, "orphans": self.orphans,
            "prompt_sha256": self.prompt_sha256, "prompt_chars": self.prompt_chars,
            "events": len(self.events),
        }


def bound(text: str, limit: int, head: int | None = None) -> tuple[str, bool, int]:
    """``(kept, truncated, total chars)``: the first 90% and the last 10% of ``limit``."""
    if len(text) <= limit:
        return text, False, len(text)
    h = int(limit * 0.9) if head is None else head
    tail = limit - h
    cut = len(text) - h - tail
    kept = text[:h] + f"\n[... {cut} characters cut ...]\n" + (text[-tail:] if tail else "")
    return kept, True, len(text)


def estimate_tokens(text: str) -> int:
    """The existing tool's estimate: words x 1.3."""
    return round(len(text.split()) * 1.3)


def new_bench_run_id(now: datetime, rng: Callable[[int], bytes] = os.urandom) -> str:
    """``b-<UTC time>-<6 hex>``: a run id (``ledger.session.new_run_id``) marked as a bench."""
    return new_run_id(now, rng, prefix="b")


# ------------------------------------------------------------------------------- agents

@dataclass
class Contestant:
    agent: Any  # ledger.run.contracts.Agent
    name: str
    spec: str
    kind: str
    version: str | None

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "kind": self.kind, "version": self.version,
                "family": jd.family_of(self.name)}


def _config_table(home: LedgerHome) -> Mapping[str, Any]:
    from ledger.run.config import load_config

    return load_config(home.config_path).agent_table()


def resolve_contestants(specs: Sequence[str], home: LedgerHome) -> tuple[list[Contestant], list[str]]:
    """Resolve agent specs (default: every agent CLI on PATH); ``(available, skipped reasons)``.

    Raises NothingToRun when no agent can run at all (exit code 2 for ``ledger bench``).
    """
    from ledger.run.agents import detect_cli_agents, resolve_agent

    table = _config_table(home)
    wanted: list[str] = []
    for spec in specs:
        wanted.extend(s.strip() for s in spec.split(",") if s.strip())
    if not wanted:
        wanted = detect_cli_agents()
        if not wanted:
            raise NothingToRun("no agent CLI found on PATH (claude, codex, gemini, cursor-agent, "
                               "aider); install one or name agents with --agent")
    out: list[Contestant] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for spec in wanted:
        agent = resolve_agent(spec, config=table)
        ok, reason = agent.available()
        if not ok:
            skipped.append(f"{spec}: {reason}")
            continue
        name = agent.name
        n = 2
        while name in seen:
            name, n = f"{agent.name}-{n}", n + 1
        seen.add(name)
        out.append(Contestant(agent, name, spec, agent.kind, agent.version()))
    if not out:
        raise NothingToRun("no agent can run here: " + "; ".join(skipped))
    return out, skipped


def resolve_judges(specs: Sequence[str], contestants: Sequence[Contestant], home: LedgerHome
                   ) -> tuple[list[Contestant], bool, str]:
    """The judge panel, whether it is the offline fallback, and why it was chosen."""
    from ledger.run.agents import detect_cli_agents, resolve_agent

    table = _config_table(home)
    wanted: list[str] = []
    for spec in specs:
        wanted.extend(s.strip() for s in spec.split(",") if s.strip())
    if wanted:
        if wanted == [jd.OFFLINE_JUDGE]:
            return [], True, "--judge offline"
        if jd.OFFLINE_JUDGE in wanted:
            raise UsageError("--judge offline cannot be combined with model judges")
        panel: list[Contestant] = []
        for spec in wanted:
            agent = resolve_agent(spec, config=table)
            ok, reason = agent.available()
            if not ok:
                raise UsageError(f"judge {spec!r} cannot run here: {reason}")
            name, n = agent.name, 2
            while any(j.name == name for j in panel):
                name, n = f"{agent.name}-{n}", n + 1
            panel.append(Contestant(agent, name, spec, agent.kind, agent.version()))
        return panel, False, "named with --judge"
    found = [a for a in detect_cli_agents() if a in JUDGE_CANDIDATES]
    if not found:
        return [], True, "no judge CLI on PATH"
    families = {c.name: jd.family_of(c.name) for c in contestants}
    chosen = [found[0]]
    first_family = jd.family_of(found[0])
    if any(f == first_family for f in families.values()):
        other = next((a for a in found[1:] if jd.family_of(a) != first_family), None)
        if other is not None:
            chosen.append(other)
    panel = []
    for spec in chosen:
        agent = resolve_agent(spec, config=table)
        panel.append(Contestant(agent, agent.name, spec, agent.kind, agent.version()))
    return panel, False, "auto: first judge CLI on PATH, plus one of another family when needed"


# ------------------------------------------------------------------------------- one call

def _collect_files(worktree: Path, answer: str) -> dict[str, str]:
    """Text files the agent wrote in its folder (when it wrote files instead of answering)."""
    named = set(code_files(answer))
    found: dict[str, str] = {}
    for path in sorted(worktree.rglob("*")):
        rel = path.relative_to(worktree)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        if len(found) >= COLLECT_MAX_FILES:
            break
        name = rel.as_posix()
        if name in named or path.stat().st_size > COLLECT_MAX_BYTES:
            continue
        try:
            found[name] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    return found


def call_agent(agent: Any, name: str, round_name: str, prompt: str, *, run_id: str,
               timeout_s: float, pricing: Mapping[str, Any] | None) -> CallResult:
    """Run one agent once on ``prompt`` in an empty private folder; never raises for the agent."""
    from ledger.run.costs import estimate_cost
    from ledger.run.process import redact_secrets, run_agent_process

    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    worktree, home = tmp / "work", tmp / "home"
    worktree.mkdir()
    home.mkdir()
    prompt_file = tmp / "prompt.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    ctx = AttemptContext(attempt_id=attempt_id(run_id, f"bench-{round_name}", name, 1, 1),
                         task_id=f"bench-{round_name}", worktree=worktree, prompt_file=prompt_file,
                         prompt=prompt, home=home, timeout_s=timeout_s)

    def failed(error: str, wall: float = 0.0) -> CallResult:
        return CallResult(name, round_name, "failed", error, None, None, wall, "", "", "", None,
                          None, "estimated", None, "none", None, "none", [], 0, [], digest,
                          len(prompt))

    start = time.monotonic()
    try:
        if len(prompt.encode("utf-8")) > MAX_ARG_BYTES:
            return failed(f"the prompt has {len(prompt.encode('utf-8'))} bytes; agent CLIs take "
                          f"at most about {MAX_ARG_BYTES} in one argument")
        try:
            inv = agent.invocation(ctx)
            outcome = run_agent_process(inv, ctx, trace="none", output_limit=OUTPUT_LIMIT)
        except LedgerError as exc:
            return failed(str(exc), time.monotonic() - start)
        except OSError as exc:
            return failed(f"cannot start the agent: {exc}", time.monotonic() - start)
        answer = extract_answer(outcome.stdout_text)
        text = answer.text
        collected = {name: redact_secrets(body, inv.secrets)
                     for name, body in _collect_files(worktree, text).items()}
        if collected:
            text = (text.rstrip() + "\n\n" + render_files(collected)).strip()
        if outcome.timed_out:
            status, error = "timeout", f"no answer within {timeout_s:g}s"
        elif outcome.signal is not None:
            status, error = "failed", f"killed by signal {outcome.signal}"
        elif outcome.exit_code not in (0, None):
            status, error = "failed", f"exit code {outcome.exit_code}" + (
                f": {answer.error}" if answer.error else "")
        elif answer.error:
            status, error = "failed", answer.error
        elif not text.strip():
            status, error = "failed", "the agent gave an empty answer"
        else:
            status, error = "ok", None
        usage = outcome.usage
        tokens_source = "reported"
        tin, tout = usage.tokens_in, usage.tokens_out
        if tin is None and tout is None:
            tin, tout, tokens_source = estimate_tokens(prompt), estimate_tokens(text), "estimated"
        cost, cost_source = estimate_cost(
            Usage(tokens_in=tin, tokens_out=tout, cost_usd=usage.cost_usd, model=usage.model),
            getattr(agent, "model", None) or name.split("-")[0], pricing=pricing)
        return CallResult(
            name, round_name, status, error, outcome.exit_code, outcome.signal, outcome.wall_s,
            text, bound(outcome.stdout_text, STDOUT_LIMIT)[0], outcome.stderr_text,
            tin, tout, tokens_source, cost, cost_source, usage.model, answer.format,
            sorted(collected), outcome.orphans, list(outcome.events)[:ACTIVITY_LIMIT], digest,
            len(prompt))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kill_run_processes(run_id: str) -> int:
    """SIGKILL every process that carries this run's attempt marker (on Ctrl-C)."""
    needle = f"LEDGER_ATTEMPT={run_id}/".encode()
    killed = 0
    for pid_name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid_name.isdigit() or int(pid_name) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid_name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if any(var.startswith(needle) for var in env.split(b"\0")):
            with contextlib.suppress(OSError):
                os.kill(int(pid_name), signal.SIGKILL)
                killed += 1
    return killed


# ------------------------------------------------------------------------------- the run

class _Bench:
    def __init__(self, home: LedgerHome, writer: JournalWriter, task: BenchTask, opts: BenchOptions,
                 run_id: str, seed: int, contestants: list[Contestant], judges: list[Contestant],
                 fallback: bool, progress: Progress, pricing: Mapping[str, Any] | None) -> None:
        self.home, self.writer, self.task, self.opts = home, writer, task, opts
        self.run_id, self.seed = run_id, seed
        self.contestants, self.judges, self.fallback = contestants, judges, fallback
        self.progress = progress
        self.pricing = pricing
        self.by_name = {c.name: c for c in contestants}
        self.ok: dict[tuple[str, str], CallResult] = {}
        self.calls: dict[tuple[str, str], CallResult] = {}
        self.checks: dict[tuple[str, str], dict[str, Any]] = {}
        self.tests: dict[tuple[str, str], dict[str, Any]] = {}
        workers = opts.parallel or max(1, len(contestants) + len(judges))
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench")

    def append(self, kind: str, data: Mapping[str, Any]) -> None:
        self.writer.append(kind, data, task="bench")

    # -- generic parallel dispatch ---------------------------------------------------------

    def dispatch(self, jobs: list[tuple[Any, str, str, str]], label: str
                 ) -> list[CallResult]:
        """Run ``(agent, name, round, prompt)`` jobs in parallel; journal each as it finishes."""
        futures: dict[Future[CallResult], tuple[str, str]] = {}
        for agent, name, round_name, prompt in jobs:
            fut = self.pool.submit(call_agent, agent, name, round_name, prompt, run_id=self.run_id,
                                   timeout_s=self.opts.timeout_s, pricing=self.pricing)
            futures[fut] = (name, round_name)
        results = []
        for i, fut in enumerate(as_completed(futures), 1):
            res = fut.result()
            results.append(res)
            what = {"ok": "done", "timeout": "timeout", "failed": "failed"}[res.status]
            extra = f", {res.error}" if res.status == "failed" and res.error else ""
            self.progress(f"[{i}/{len(futures)}] {res.agent} - {what} ({res.wall_s:.0f}s{extra})"
                          + (f" [{label}]" if label else ""))
            self._journal_call(res)
        return results

    def _journal_call(self, res: CallResult) -> None:
        self.append("bench.response", res.record())
        # Tool calls and results (the answer text itself is in bench.response).
        events = [{"kind": k, "data": d} for k, d in res.events if k != "agent.output"]
        if events:
            self.append("bench.activity", {"agent": res.agent, "round": res.round,
                                           "events": events, "count": len(events)})
        self.calls[(res.agent, res.round)] = res
        if res.status == "ok":
            self.ok[(res.agent, res.round)] = res

    # -- rounds ------------------------------------------------------------------------------

    def code_round(self) -> None:
        prompt = self.task.agent_prompt()
        self.progress(f"code round: {len(self.contestants)} agent(s), timeout "
                      f"{self.opts.timeout_s:g}s each")
        self.dispatch([(c.agent, c.name, jd.ROUND_CODE, prompt) for c in self.contestants], "")

    def corpus_checks(self, round_name: str) -> None:
        corpus = self.task.corpus
        if corpus is None:
            return
        todo = [(a, r) for (a, r) in self.ok if r == round_name]
        futs = {self.pool.submit(corpus_check, code_files(self.ok[k].text), corpus,
                                 self.opts.check_timeout_s): k for k in todo}
        for fut in as_completed(futs):
            agent, rnd = futs[fut]
            data = fut.result()
            self.checks[(agent, rnd)] = data
            self.append("bench.check", {"agent": agent, "round": rnd, **data})
            c = data["counts"]
            self.progress(f"corpus check {agent} ({rnd}): {c['passed']} passed, "
                          f"{c['failed'] + c['error']} failed"
                          + (f", missing {', '.join(data['missing_files'])}"
                             if data["missing_files"] else ""))

    def review_round(self, round_name: str, revised_name: str) -> None:
        authors = sorted(a for (a, r) in self.ok if r == round_name)
        jobs = []
        for author in authors:
            reviewers = [r for r in authors if r != author]
            if not reviewers:
                self.append("bench.review", {"author": author, "reviewer": None,
                                             "round": round_name, "status": "skipped",
                                             "reason": "no other agent answered to review it"})
                continue
            prompt = self.task.review_prompt(self.ok[(author, round_name)].text, round_name)
            for reviewer in reviewers:
                jobs.append((author, reviewer, prompt))
        if not jobs:
            return
        self.progress(f"review round ({round_name}): {len(jobs)} review(s)")
        futs: dict[Future[CallResult], tuple[str, str]] = {
            self.pool.submit(call_agent, self.by_name[rev].agent, rev, f"review-{round_name}", p,
                             run_id=self.run_id, timeout_s=self.opts.timeout_s,
                             pricing=self.pricing): (author, rev)
            for author, rev, p in jobs}
        critiques: dict[str, list[str]] = {}
        for i, fut in enumerate(as_completed(futs), 1):
            author, rev = futs[fut]
            res = fut.result()
            text, cut, total = bound(res.text, TEXT_LIMIT)
            self.append("bench.review", {
                "author": author, "reviewer": rev, "round": round_name, "status": res.status,
                "error": res.error, "text": text, "text_truncated": cut, "text_chars": total,
                "wall_s": round(res.wall_s, 6), "tokens_in": res.tokens_in,
                "tokens_out": res.tokens_out, "tokens_source": res.tokens_source,
                "cost_usd": res.cost_usd, "cost_source": res.cost_source})
            self.progress(f"[{i}/{len(futs)}] {rev} reviewed {author} - "
                          f"{'done' if res.status == 'ok' else res.status} ({res.wall_s:.0f}s)")
            if res.status == "ok":
                critiques.setdefault(author, []).append(res.text)
        revise = []
        for author in authors:
            if author in critiques:
                prompt = self.task.revise_prompt(self.ok[(author, round_name)].text,
                                                 critiques[author], round_name)
                revise.append((self.by_name[author].agent, author, revised_name, prompt))
        if revise:
            self.progress(f"revisions ({revised_name}): {len(revise)} agent(s)")
            self.dispatch(revise, revised_name)

    def tests_round(self, round_name: str = jd.ROUND_TESTS) -> None:
        jobs = [(self.by_name[a].agent, a, round_name,
                 self.task.tests_prompt(self.ok[(a, jd.ROUND_CODE)].text))
                for (a, r) in sorted(self.ok) if r == jd.ROUND_CODE]
        if not jobs:
            return
        self.progress(f"tests round: {len(jobs)} agent(s)")
        self.dispatch(jobs, round_name)
        self.execute_tests(round_name)

    def execute_tests(self, round_name: str) -> None:
        todo = sorted(a for (a, r) in self.ok if r == round_name)
        futs = {}
        for agent in todo:
            code = code_files(self.ok[(agent, jd.ROUND_CODE)].text)
            tests = code_files(self.ok[(agent, round_name)].text)
            tests = {n: b for n, b in tests.items() if n not in code}
            lang = language_of(code, self.ok[(agent, jd.ROUND_CODE)].text)
            futs[self.pool.submit(run_agent_tests, code, tests, lang,
                                  self.opts.check_timeout_s)] = agent
        for fut in as_completed(futs):
            agent = futs[fut]
            data = fut.result()
            self.tests[(agent, round_name)] = data
            self.append("bench.tests", {"agent": agent, "round": round_name, **data})
            if data.get("ran"):
                c = data["counts"]
                self.progress(f"tests of {agent} ({round_name}): {c['passed']} passed, "
                              f"{c['failed']} failed, {c['error']} errors")
            else:
                self.progress(f"tests of {agent} ({round_name}): not run ({data.get('reason')})")

    def static_round(self) -> None:
        tools = self.opts.tools if self.opts.tools is not None else discover_tools()
        futs = {}
        for (agent, r) in sorted(self.ok):
            if r != jd.ROUND_CODE:
                continue
            files = code_files(self.ok[(agent, r)].text)
            tests_res = self.ok.get((agent, jd.ROUND_TESTS))
            tests = {n: b for n, b in code_files(tests_res.text).items()
                     if n not in files} if tests_res else {}
            lang = language_of(files, self.ok[(agent, r)].text)
            futs[self.pool.submit(static_checks, files, tests, lang, tools,
                                  self.opts.check_timeout_s)] = agent
        for fut in as_completed(futs):
            agent = futs[fut]
            data = fut.result()
            self.append("bench.static", {"agent": agent, **data})
            summary = ", ".join(
                f"{k} {'-' if v is None else ('ok' if v.get('ok') else 'fail')}"
                for k, v in sorted(data["checks"].items()))
            self.progress(f"static checks of {agent}: {summary or data['reasons']}")

    # -- judging -----------------------------------------------------------------------------

    def judging(self) -> None:
        rounds = [r for r in jd.ROUNDS if any(rr == r for (_a, rr) in self.ok)]
        passes = [jd.PASS_PRIMARY] + ([jd.PASS_SWAP] if self.opts.swap_check else [])
        jobs: list[tuple[Any, str, str, str, dict[str, Any]]] = []
        for round_name in rounds:
            responses = {a: self.ok[(a, r)].text for (a, r) in sorted(self.ok) if r == round_name}
            contestants = {a: jd.family_of(a, self.ok[(a, round_name)].model) for a in responses}
            judges = ({jd.OFFLINE_JUDGE: "offline"} if self.fallback
                      else {j.name: jd.family_of(j.name) for j in self.judges})
            assignment = jd.assign_judges(contestants, judges)
            for judge_name, agents in assignment.by_judge.items():
                if not agents:
                    continue
                for pass_name in passes:
                    call = f"{round_name}/{pass_name}/{judge_name}"
                    order = jd.presentation_order(agents, self.seed, f"{round_name}/{judge_name}")
                    if pass_name == jd.PASS_SWAP:
                        order = list(reversed(order))
                    jp = jd.judge_prompt(self.task.text, {a: responses[a] for a in agents}, order,
                                         round_name)
                    stored = jp.prompt
                    if self.opts.no_snapshot:  # the task text stays out of the journal
                        stored = jd.judge_prompt(NOT_STORED, {a: responses[a] for a in agents},
                                                 order, round_name).prompt
                    prompt, cut, total = bound(stored, PROMPT_LIMIT)
                    record: dict[str, Any] = {
                        "call": call, "judge": judge_name, "family": judges[judge_name],
                        "round": round_name, "pass": pass_name, "seed": self.seed,
                        "order": jp.order, "labels": jp.labels, "truncated": jp.truncated,
                        "limit": jp.limit, "task_truncated": jp.task_truncated,
                        "own_family": {a: judges[judge_name] == contestants[a] for a in agents},
                        "prompt": prompt, "prompt_truncated": cut, "prompt_chars": total,
                        "prompt_sha256": hashlib.sha256(jp.prompt.encode()).hexdigest(),
                        "prompt_version": jd.JUDGE_PROMPT_VERSION,
                    }
                    self.append("bench.judge_prompt", record)
                    jobs.append((judge_name, call, round_name, jp.prompt, record))
        if not jobs:
            self.progress("judging: no answer to judge")
            return
        label = "offline judge (deterministic fallback)" if self.fallback else \
            ", ".join(j.name for j in self.judges)
        self.progress(f"judging: {len(jobs)} call(s) by {label}")
        if self.fallback:
            for judge_name, call, round_name, _prompt, record in jobs:
                text = self.offline_answer(round_name, record["labels"])
                self.finish_judge_call(record, {
                    "call": call, "judge": judge_name, "round": round_name,
                    "pass": record["pass"], "status": "ok", "error": None, "exit_code": 0,
                    "wall_s": 0.0, "text": text, "stdout": text, "tokens_in": None,
                    "tokens_out": None, "tokens_source": "none", "cost_usd": 0.0,
                    "cost_source": "none", "model": f"offline judge {self._offline_version()}"})
            return
        panel = {j.name: j for j in self.judges}
        futs: dict[Future[CallResult], dict[str, Any]] = {}
        for judge_name, _call, round_name, prompt, record in jobs:
            fut = self.pool.submit(call_agent, panel[judge_name].agent, judge_name,
                                   f"judge-{round_name}", prompt, run_id=self.run_id,
                                   timeout_s=self.opts.timeout_s, pricing=self.pricing)
            futs[fut] = record
        for i, fut in enumerate(as_completed(futs), 1):
            record = futs[fut]
            res = fut.result()
            text, cut, total = bound(res.text, TEXT_LIMIT)
            self.finish_judge_call(record, {
                "call": record["call"], "judge": record["judge"], "round": record["round"],
                "pass": record["pass"], "status": res.status, "error": res.error,
                "exit_code": res.exit_code, "wall_s": round(res.wall_s, 6), "text": text,
                "text_truncated": cut, "text_chars": total, "stdout": res.stdout,
                "tokens_in": res.tokens_in, "tokens_out": res.tokens_out,
                "tokens_source": res.tokens_source, "cost_usd": res.cost_usd,
                "cost_source": res.cost_source, "model": res.model})
            self.progress(f"[{i}/{len(futs)}] judge {record['judge']} ({record['call']}) - "
                          f"{'done' if res.status == 'ok' else res.status} ({res.wall_s:.0f}s)")

    def finish_judge_call(self, prompt_record: Mapping[str, Any], raw: dict[str, Any]) -> None:
        self.append("bench.judge_raw", raw)
        labels = dict(prompt_record["labels"])
        if raw["status"] == "ok":
            parsed = jd.parse_scores(str(raw["text"]), sorted(labels))
            scores, reasons = parsed.scores, parsed.reasons
        else:
            scores = dict.fromkeys(labels)
            reasons = dict.fromkeys(labels, f"the judge {raw['status']}")
        for label in sorted(labels):
            self.append("bench.verdict", {
                "call": raw["call"], "judge": raw["judge"], "round": raw["round"],
                "pass": raw["pass"], "agent": labels[label], "label": label,
                "status": "scored" if scores[label] is not None else jd.UNSCORED,
                "scores": scores[label], "reason": reasons.get(label, "")})

    def _offline_version(self) -> str:
        from evaluators.judge import JUDGE_VERSION

        return str(JUDGE_VERSION)

    def offline_answer(self, round_name: str, labels: Mapping[str, str]) -> str:
        """The offline judge's answer, in the judges' JSON form (see docs/bench.md)."""
        import json

        from evaluators.judge import offline_verdict

        out = {}
        for label, agent in sorted(labels.items()):
            verdict = offline_verdict(self.offline_facts(agent, round_name))
            out[label] = verdict["scores"]
        return json.dumps(out, sort_keys=True)

    def offline_facts(self, agent: str, round_name: str) -> dict[str, Any]:
        """Facts for the offline judge from what the bench measured about one answer."""
        from evaluators.leaderboard import parse_self_eval
        from evaluators.responses import python_syntax_ok

        res = self.ok[(agent, round_name)]
        files = code_files(res.text)
        testing = round_name.startswith("tests")
        ran = self.tests.get((agent, round_name)) if testing else self.checks.get((agent, round_name))
        counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        hidden_ran = False
        hidden_passed = False
        if ran is not None and ran.get("ran") and ran.get("counts"):
            counts = dict(ran["counts"])
            hidden_ran, hidden_passed = True, ran.get("exit_code") == 0
        elif files:
            ok = python_syntax_ok({n: b for n, b in files.items() if n.endswith(".py")})
            if ok is not None:
                n_py = sum(1 for n in files if n.endswith(".py"))
                counts = {"passed": n_py if ok else 0, "failed": 0 if ok else n_py,
                          "error": 0, "skipped": 0}
                hidden_ran, hidden_passed = True, bool(ok)
        signals = [bool(res.text.strip()), bool(files)]
        if self.task.corpus is not None and not testing:
            signals.append(all(f in files for f in self.task.corpus.files))
        if not testing:
            signals.append(parse_self_eval(res.text) is not None)
        bodies = "\n".join(files.values())
        return {
            "hidden_counts": counts, "hidden_ran": hidden_ran, "hidden_passed": hidden_passed,
            "signals_total": len(signals), "signals_passed": sum(signals),
            "stub_markers": sum(1 for line in bodies.splitlines() if STUB_MARK.search(line)),
            "todo_markers": sum(1 for line in bodies.splitlines() if TODO_MARK.search(line)),
            "regressions": [], "hallucinated_names": [], "out_of_scope_files": [],
            "conflict": False, "changed_files": sorted(files), "crashed": False,
        }

    # -- the whole run -----------------------------------------------------------------------

    def run(self) -> None:
        self.code_round()
        self.corpus_checks(jd.ROUND_CODE)
        if self.opts.with_review:
            self.review_round(jd.ROUND_CODE, jd.ROUND_CODE_REVISED)
            self.corpus_checks(jd.ROUND_CODE_REVISED)
        if self.opts.with_tests:
            self.tests_round(jd.ROUND_TESTS)
            if self.opts.with_test_review:
                self.review_round(jd.ROUND_TESTS, jd.ROUND_TESTS_REVISED)
                self.execute_tests(jd.ROUND_TESTS_REVISED)
        if self.opts.with_static:
            self.static_round()
        self.judging()


def run_bench(home: LedgerHome, task: BenchTask, opts: BenchOptions, *,
              progress: Progress | None = None,
              now: Callable[[], datetime] = lambda: datetime.now(UTC),
              rng: Callable[[int], bytes] = os.urandom,
              on_view: Callable[[dict[str, Any]], list[str]] | None = None) -> BenchResult:
    """Run a whole bench and return the leaderboard view (recorded as ``view.recorded``).

    ``on_view`` (e.g. writing the report files) is called with the view before the run is closed;
    the paths it returns are recorded in ``bench.finished``.
    """
    say: Progress = progress or (lambda _line: None)
    if opts.with_test_review and not opts.with_tests:
        raise UsageError("--with-test-review (--with-test-adversarial) needs --with-tests")
    if opts.timeout_s <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    contestants, skipped = resolve_contestants(opts.agents, home)
    for reason in skipped:
        say(f"warning: skipping {reason}")
    judges, fallback, why = resolve_judges(opts.judges, contestants, home)
    from ledger.run.costs import resolve_pricing

    pricing, _file = resolve_pricing(home.path, opts.pricing_file)
    run_id = new_bench_run_id(now(), rng)
    seed = opts.seed if opts.seed is not None else int.from_bytes(rng(4), "big")
    board = new_leaderboard_state(None)  # as replay folds it: from the first bench.* entry
    bench: _Bench | None = None
    with Session.open(home) as session:
        try:
            judge_records = ([{"name": jd.OFFLINE_JUDGE, "spec": jd.OFFLINE_JUDGE,
                               "kind": "builtin", "version": None, "family": "offline"}]
                             if fallback else [j.record() for j in judges])
            writer = session.start(run_id, {
                "config": {"kind": "bench", "agents": [c.spec for c in contestants],
                           "judges": [j["spec"] for j in judge_records], "repeat": 1,
                           "parallel": opts.parallel or len(contestants),
                           "timeout_s": opts.timeout_s, "trace": "none", "executor": "bench",
                           "tiers": [], "task_ids": []},
                "tasks": [], "agents": [{k: v for k, v in c.record().items() if k != "family"}
                                        for c in contestants],
            }, fold=False, listeners=[lambda e: fold_leaderboard(board, e)])
            writer.append("bench.started", _started_record(task, opts, contestants, skipped,
                                                           judge_records, fallback, why, seed),
                          task="bench")
            if fallback:
                say(f"judge: offline deterministic judge (fallback: {why})")
            else:
                say(f"judge: {', '.join(j.name for j in judges)} ({why})")
            bench = _Bench(home, writer, task, opts, run_id, seed, contestants, judges, fallback,
                           say, pricing)
            try:
                bench.run()
            except KeyboardInterrupt:
                killed = kill_run_processes(run_id)
                bench.pool.shutdown(wait=False, cancel_futures=True)
                writer.append("bench.finished", {"status": "interrupted", "killed": killed},
                              task="bench")
                session.finish("interrupted", len(contestants), 0)
                raise
            view = leaderboard_view(board)  # folded as the entries were appended: no read-back
            session.record_view(BENCH_EVALUATOR, BENCH_VERSION, view)
            files = on_view(view) if on_view is not None else []
            counts = view["counts"]
            writer.append("bench.finished", {
                "status": view["verdict"], "attempted": counts["attempted"],
                "succeeded": counts["succeeded"], "scored": counts["scored"], "reports": files,
            }, task="bench")
            session.finish("finished", counts["attempted"], counts["succeeded"])
            session.checkpoint()
        finally:
            if bench is not None:
                bench.pool.shutdown(wait=True)
    verdict = str(view["verdict"])
    exit_code = 3 if verdict == "FAIL" else 0
    return BenchResult(run_id, view, verdict, exit_code)


def _started_record(task: BenchTask, opts: BenchOptions, contestants: Sequence[Contestant],
                    skipped: Sequence[str], judge_records: list[dict[str, Any]], fallback: bool,
                    why: str, seed: int) -> dict[str, Any]:
    """The data of ``bench.started``: the task, the options, the panel, the seed."""
    options = {"with_tests": opts.with_tests, "with_adversarial": opts.with_review,
               "with_test_adversarial": opts.with_test_review,
               "with_static_checks": opts.with_static, "swap_check": opts.swap_check}
    return {
        "version": BENCH_VERSION, "mode": task.mode, "task_source": task.source,
        "task_hash": task.task_hash, "task_chars": len(task.text),
        "task_title": None if opts.no_snapshot else task.title,
        "task_snapshot": task.snapshot(not opts.no_snapshot),
        "snapshot_stored": not opts.no_snapshot, "detail": dict(task.detail),
        "options": options, "agents": [c.record() for c in contestants],
        "skipped_agents": list(skipped), "judges": judge_records, "judge_fallback": fallback,
        "judge_choice": why, "seed": seed, "timeout_s": opts.timeout_s,
        "project": opts.project if opts.project is not None else str(Path.cwd()),
        "corpus_version": task.corpus.version if task.corpus else None,
    }


def bench_runs(journal: Journal) -> list[tuple[str, dict[str, Any], int]]:
    """``(run_id, bench.started data, ts)`` of every bench run, newest first."""
    out = [(str(e.run), dict(e.data), e.ts) for e in journal.entries(kind="bench.started")
           if e.run is not None]
    out.reverse()
    return out


def entries_of(journal: Journal, run_id: str) -> Iterable[Any]:
    return journal.entries(run=run_id)


__all__ = ["BenchOptions", "BenchResult", "CallResult", "bench_runs", "call_agent",
           "estimate_tokens", "kill_run_processes", "new_bench_run_id", "resolve_contestants",
           "resolve_judges", "run_bench"]
