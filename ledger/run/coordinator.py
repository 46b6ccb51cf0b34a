"""The coordinator of a run: takes a plan (``plan.py``), hands its attempts to an executor
(``executors/``), and appends what they report through its ``ledger.session.Session`` (the one
writer; the attestation policy is ``CleanRunAttestation`` over ``attestor.Attestor``).

    execute_run(home, RunRequest)
      the session (keys created if absent, the journal checked sound) -> tasks -> agents (all
      must be able to run, checked up front)
      run.started | run.resumed
      loop: attempt.started (journaled before the attempt is submitted) -> executor.submit
            executor.events() -> append each entry as it arrives (phases go to the progress view)
            after an attempt's attempt.finished: its clean-run attestation (see below)
      judge.verdict per scored attempt, run.finished, view.recorded, signed checkpoint

Attestation step (the session's policy), per attempt, once its last entry (``attempt.finished``)
is journaled: sign a checkpoint of the journal head, scan the attempt's entries against the
commitment it journaled before the agent started (``attest.scan.scan_attempt`` with the commitment key, under the scope
the worker reported in ``agent.started``: its folders, and a network allowlist of the task's
entries plus the agent's model API names and the addresses they resolved to, port 443 unless
declared otherwise), and append the signed, sealed ``attestation``
(``attest.attestation.build_attestation``), bound to that checkpoint. An attempt that never
journaled a commitment (it failed before its workspace existed) gets none.

At most ``parallel`` attempts are in flight, so an ``attempt.started`` entry marks when an
attempt was really handed to a worker. Ctrl-C (or SIGTERM) never tears an append in half: the
interrupt is held while an entry is written, then the running attempts are told to stop, their
last reports are appended, attempts that did not report get ``attempt.finished`` with status
``interrupted``, and ``run.finished`` says ``interrupted``. A coordinator killed outright leaves
a journal that verifies (every append is one transaction); ``--resume`` first marks its
unfinished attempts ``interrupted`` and then runs every (task, agent, repeat) slot that has no
``completed`` or ``error`` try under the next try number.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from attest.attestation import COMMITMENT_KEY_LABEL
from evaluators.fold import parse_attempt_id
from ledger.home import LedgerHome
from ledger.journal.codec import Entry
from ledger.log import get_logger
from ledger.run.attestor import Attestor, secret_patterns_of
from ledger.run.config import LedgerConfig, load_config
from ledger.run.contracts import AttemptEvent, AttemptPlan
from ledger.run.executors import Executor, check_available, make_executor
from ledger.run.plan import (
    RunPlan,
    RunRequest,
    Slot,
    executor_kind,
    fresh_plan,
    resume_plan,
    task_record,
)
from ledger.run.summary import AttemptResult, RunSummary
from ledger.session import HARNESS, CleanRunAttestation, JournalWriter, Session

if TYPE_CHECKING:
    from ledger.tasks.model import Task

STOP_GRACE_S = 10.0
MAX_PENDING = 500  # streamed entries held back at most before they are appended


class Progress(Protocol):
    """What the command line shows while a run goes on (all methods are optional no-ops)."""

    def note(self, message: str) -> None: ...

    def start(self, run_id: str, total: int) -> None: ...

    def phase(self, attempt_id: str, phase: str) -> None: ...

    def usage(self, attempt_id: str, tokens: int, cost_usd: float | None) -> None: ...

    def finished(self, result: AttemptResult) -> None: ...

    def stop(self) -> None: ...


class NullProgress:
    def note(self, message: str) -> None:
        pass

    def start(self, run_id: str, total: int) -> None:
        pass

    def phase(self, attempt_id: str, phase: str) -> None:
        pass

    def usage(self, attempt_id: str, tokens: int, cost_usd: float | None) -> None:
        pass

    def finished(self, result: AttemptResult) -> None:
        pass

    def stop(self) -> None:
        pass


def _pricing(home: LedgerHome) -> Any:
    from ledger.agents.costs import resolve_pricing

    return resolve_pricing(home.path)[0]


class Coordinator:
    """Runs one plan on one session (its writer). Use :func:`execute_run`."""

    def __init__(self, home: LedgerHome, session: Session, plan: RunPlan,
                 cfg: LedgerConfig, req: RunRequest, progress: Progress,
                 executor_factory: Callable[[str, int], Executor],
                 source: LedgerHome | None = None) -> None:
        self.home, self.session, self.plan = home, session, plan
        self.journal, self.keys = session.journal, session.keys
        self.cfg, self.req, self.progress = cfg, req, progress
        self.executor_factory = executor_factory
        self.source = source or home
        self.gate = session.gate
        self.log = get_logger(run=plan.run_id)
        self.results: dict[str, AttemptResult] = {}
        self.in_flight: dict[str, Slot] = {}
        self.node = socket.gethostname()
        self._plan_config: dict[str, Any] = {}
        self._expected_found: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._expected_runs: dict[str, bool] = {}
        self.tasks = {t.id: t for t in plan.tasks}
        self.attestation = CleanRunAttestation(
            plan.run_id, Attestor(session.journal, session.keys), self.tasks, self._attest_failed)
        # What the run's entries say, kept as they are appended (or read back on resume):
        self._started: set[str] = set()
        self._completed: set[tuple[str, str, int]] = set()  # (task, agent, repeat)
        self._judged: set[str] = set()  # attempts with this judge's verdict
        self.resolver: Callable[[str, int], Sequence[str]] | None = None  # None: the node's DNS

    @property
    def writer(self) -> JournalWriter:
        return self.session.writer

    def start(self) -> None:
        """A fresh run: ``run.started`` (the first entry of the run)."""
        p = self.plan
        self.session.start(p.run_id, {
            "harness_version": HARNESS,
            "config": p.config,
            "tasks": [task_record(t) for t in p.tasks],
            "agents": [a.record() for a in p.agents],
        }, attestation=self.attestation, listeners=[self._track])

    def attach(self) -> None:
        """A resumed run: fold and track the entries the run journaled before (read once, by
        the resume planning), then let them go."""
        self.session.attach(self.plan.run_id, self.plan.prior,
                                          attestation=self.attestation, listeners=[self._track])
        self.plan.prior = []

    # -- journal writes (the only ones a run makes)

    def append(self, kind: str, data: Mapping[str, Any], *, task: str | None = None) -> Entry:
        return self.writer.append(kind, data, task=task)

    def _flush(self) -> None:
        self.writer.flush()

    def _track(self, e: Entry) -> None:
        """Keep what the coordinator needs to know about the run's entries (one pass, as they
        are appended), so it never reads the journal back."""
        attempt = e.data.get("attempt")
        if not isinstance(attempt, str):
            return
        kind = e.kind
        if kind == "attempt.started":
            self._started.add(attempt)
        elif kind == "attempt.finished":
            parsed = parse_attempt_id(attempt)
            if e.data.get("status") == "completed" and parsed is not None:
                self._completed.add(parsed[1:4])
        elif kind == "attestation" and attempt in self.results:
            self.results[attempt].absorb("attestation", e.data)
        elif kind == "judge.verdict" and self._is_this_judge(e.data):
            self._judged.add(attempt)

    @staticmethod
    def _is_this_judge(data: Mapping[str, Any]) -> bool:
        from evaluators.judge import JUDGE_NAME, JUDGE_VERSION

        return data.get("judge") == JUDGE_NAME and data.get("version") == JUDGE_VERSION

    def _attest_failed(self, attempt_id: str, exc: Exception) -> None:
        """An attestation that raised is reported, and never stops the run."""
        self.progress.note(f"attestation of {attempt_id} failed: {type(exc).__name__}: {exc}")
        self.log.error("attestation.failed", attempt=attempt_id, error=type(exc).__name__)

    def _attempt_plan(self, slot: Slot) -> AttemptPlan:
        p = self.plan
        config = {
            **self._plan_config,
            "tier": slot.task.tier,
            "task_hash": slot.task.hash,
            "agent_extra": dict(slot.agent.extra.get(slot.task.id, {})),
            "sandbox": p.sandbox_of(slot.task.id),
        }
        env = p.environments.get(slot.task.id)
        if env is not None:  # the task's image (run by id), or why it is not there
            config["image" if not env.failed else "environment_error"] = (
                dict(env.ready) if not env.failed else env.error)
        else:  # hidden ids this ledger already collected for the task (expected_reuse)
            known = self._known_expected(slot.task, str(config["sandbox"]))
            if known is not None:
                config["known_expected"] = known
        timeout = p.timeout_s if p.timeout_s is not None else slot.task.max_duration_s
        return AttemptPlan(
            run_id=p.run_id, attempt_id=slot.attempt_id(p.run_id), task_root=str(slot.task.root),
            task_id=slot.task.id, agent_spec=slot.agent.spec, repeat=slot.repeat,
            try_no=slot.try_no, timeout_s=float(timeout), trace=p.trace, config=config,
        )

    def _known_expected(self, task: Task, sandbox: str) -> dict[str, Any] | None:
        """The last collected ``grading.expected`` of ``task`` this ledger holds for the same
        hash, harness and backend (``ledger.run.expected_reuse``), found ones kept per run."""
        from ledger.run.expected_reuse import recorded_expected

        key = (task.id, task.hash, sandbox)
        if key not in self._expected_found:
            found = recorded_expected(self.journal, task, sandbox=sandbox, harness=HARNESS,
                                      runs=self._expected_runs)
            if found is None:
                return None
            self._expected_found[key] = found
        return self._expected_found[key]

    def _start(self, executor: Executor, slot: Slot) -> None:
        plan = self._attempt_plan(slot)
        # In flight before it is journaled: an interrupt right after the append still gets the
        # attempt marked interrupted.
        self.results[plan.attempt_id] = AttemptResult(
            plan.attempt_id, slot.task.id, slot.agent.name, slot.repeat, slot.try_no)
        self.in_flight[plan.attempt_id] = slot
        # A remote executor places the attempt first: the node it will run on and the hash of
        # the task archive it will run are journaled before it is submitted.
        placed = executor.place(plan)
        try:
            self.append("attempt.started", {
                "attempt": plan.attempt_id, "agent": slot.agent.name,
                "agent_spec": slot.agent.spec, "repeat": slot.repeat, "try": slot.try_no,
                "tier": slot.task.tier,
                "node": placed.get("node") or self.node,
                "archive": placed.get("archive"),
            }, task=slot.task.id)
        except BaseException:
            if not self._journaled(plan.attempt_id):
                del self.in_flight[plan.attempt_id]
                del self.results[plan.attempt_id]
            raise
        executor.submit(plan)
        self.log.info("attempt.submitted", attempt=plan.attempt_id, node=placed.get("node"))

    def _journal_environments(self) -> None:
        """``environment.ready`` (or ``environment.failed``) of each task's image, made ready by
        the plan, before the first attempt (ledger/run/environments.py)."""
        for task_id, env in self.plan.environments.items():
            kind, data = env.entry()
            self.append(kind, data, task=task_id)

    def _journaled(self, attempt_id: str) -> bool:
        return attempt_id in self._started

    def _handle(self, event: AttemptEvent, ready: int = 0) -> bool:
        """Append one streamed event; True when it finished its attempt.

        While more events are already waiting (``ready``), entries are held and appended as one
        transaction when the burst ends (or at MAX_PENDING, or before anything else is
        appended), so a burst of trace events costs one commit, not one each.
        """
        if event.attempt_id not in self.in_flight:
            return False
        if event.kind == "phase":
            self.progress.phase(event.attempt_id, str(event.data.get("phase")))
            return False
        held = self.writer.hold(event.kind, event.data, event.task_id)
        if ready <= 0 or held >= MAX_PENDING or event.kind == "attempt.finished":
            self._flush()
        result = self.results[event.attempt_id]
        result.absorb(event.kind, event.data)
        if event.kind == "model.response":
            self.progress.usage(event.attempt_id, result.tokens_so_far, result.cost_usd)
        if event.kind == "attempt.finished":
            del self.in_flight[event.attempt_id]
            self.log.info("attempt.finished", attempt=event.attempt_id,
                          status=event.data.get("status"), outcome=result.outcome)
            self.progress.finished(result)
            return True
        return False

    def run(self) -> RunSummary:
        p = self.plan
        self._plan_config = {
            "commitment_key": self.keys.subkey(COMMITMENT_KEY_LABEL),
            "secret_patterns": secret_patterns_of(self.keys),
            "named_agents": self.cfg.agent_table(),
            "pricing": _pricing(self.source),
            "keep_worktree": self.req.keep_worktrees,
            "sandbox": p.config.get("sandbox", "none"),
            "canaries": p.config.get("canaries", True) is not False,
            "grading_trace": p.config.get("grading_trace", True) is not False,
            "agent_config": self.cfg.agent_config(),
            "sandbox_hidden": [str(self.home.path), str(self.source.path)],
            "limits": dict(self.cfg.limits),
        }
        if self.req.test_timeout_s is not None:
            self._plan_config["test_timeout_s"] = self.req.test_timeout_s
        if self.resolver is not None:
            self._plan_config["resolver"] = self.resolver
        queue = list(p.slots)
        status = "finished"
        executor: Executor | None = None
        self.gate.install()
        try:
            self._journal_environments()
            self.progress.start(p.run_id, len(queue))
            self.log.info("run.started", resumed=p.resumed, attempts=len(queue),
                          parallel=p.parallel, executor=executor_kind(self.req, self.cfg))
            if queue:
                kind = executor_kind(self.req, self.cfg)
                executor = self.executor_factory(kind, min(p.parallel, len(queue)))
            try:
                if executor is not None:
                    self._drive(executor, queue)
            except KeyboardInterrupt:
                status = "interrupted"
                self._stop(executor)
            self._finish(status)
        finally:
            if executor is not None:
                executor.close()
            self.gate.uninstall()
            self.progress.stop()
        note = self.session.checkpoint()
        self.log.info("run.finished", status=status, tree_size=self.journal.size)
        return RunSummary(p.run_id, status, p.resumed, list(self.results.values()), note,
                          self.journal.size, self.home.path, list(p.notes))

    def _drive(self, executor: Executor, queue: list[Slot]) -> None:
        """Keep ``parallel`` attempts in flight and append their events until all finished."""
        while queue or self.in_flight:
            while queue and len(self.in_flight) < self.plan.parallel:
                self._start(executor, queue.pop(0))
            for event in executor.events():
                if self._handle(event, executor.ready()) and queue:
                    break

    def _stop(self, executor: Executor | None) -> None:
        """After Ctrl-C: stop running attempts, append what they still report, mark the rest."""
        self.progress.note("interrupted: stopping running attempts (Ctrl-C again to stop now)")
        self.log.warning("run.interrupted", in_flight=len(self.in_flight))
        if executor is not None:
            for attempt_id in list(self.in_flight):
                executor.cancel(attempt_id, status="interrupted")
            deadline = time.monotonic() + STOP_GRACE_S
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
                while self.in_flight and time.monotonic() < deadline:
                    for event in executor.events(idle_timeout=0.5):
                        self._handle(event, executor.ready())
                        if not self.in_flight or time.monotonic() > deadline:
                            break
        for attempt_id, slot in list(self.in_flight.items()):
            data = {"attempt": attempt_id, "status": "interrupted",
                    "error": "the run was interrupted before the attempt reported back"}
            with contextlib.suppress(KeyboardInterrupt):
                self.append("attempt.finished", data, task=slot.task.id)
            self.results[attempt_id].absorb("attempt.finished", data)
            del self.in_flight[attempt_id]

    def _finish(self, status: str) -> None:
        """Judge verdicts, run.finished, then the recorded view (which covers run.finished)."""
        with contextlib.suppress(KeyboardInterrupt):
            self._flush()
        with contextlib.suppress(KeyboardInterrupt), self.gate.critical():
            self._judge()
            slots = {(t.id, a.name, r) for t in self.plan.tasks for a in self.plan.agents
                     for r in range(1, self.plan.repeat + 1)}
            self.session.finish(status, len(slots), len(self._completed & slots))
            self._record_view()

    def _judge(self) -> None:
        """The offline judge's verdict on every scored, completed attempt not judged yet, from
        the run's fold (no read-back)."""
        from evaluators.facts import facts_of
        from evaluators.judge import offline_verdict

        scored, _ = facts_of(self.writer.state)
        facts = {f.attempt: f.as_dict() for f in scored}
        items = [("judge.verdict", {"attempt": aid, **offline_verdict(facts[aid])},
                  facts[aid].get("task"))
                 for aid in sorted(facts)
                 if aid not in self._judged and facts[aid].get("status") == "completed"]
        if items:
            self.writer.append_many(items)

    def _record_view(self) -> None:
        """``view.recorded``: the golden view of the run's fold, then the statistics view of the
        same fold (what ``ledger replay`` checks)."""
        from evaluators import stats_view
        from evaluators.views import EVALUATOR_NAME, EVALUATOR_VERSION, view

        self.session.record_view(EVALUATOR_NAME, EVALUATOR_VERSION, view(self.writer.state))
        self.session.record_view(stats_view.EVALUATOR_NAME, stats_view.EVALUATOR_VERSION,
                                 stats_view.view(self.writer.state))


def _finished(entries: Sequence[Entry]) -> bool:
    """Whether a run's entries end its last segment: a ``run.finished`` after any ``run.resumed``."""
    lifecycle = [e.kind for e in entries if e.kind in ("run.finished", "run.resumed")]
    return bool(lifecycle) and lifecycle[-1] == "run.finished"


def _task_of(attempt_id: str) -> str | None:
    parsed = parse_attempt_id(attempt_id)
    return parsed[1] if parsed is not None else None


def execute_run(
    home: LedgerHome,
    request: RunRequest,
    *,
    progress: Progress | None = None,
    executor_factory: Callable[[str, int], Executor] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    rng: Callable[[int], bytes] = os.urandom,
    source: LedgerHome | None = None,
    resolver: Callable[[str, int], Sequence[str]] | None = None,
) -> RunSummary:
    """Run (or resume) a run end to end and return its summary; the journal has every event.

    ``source`` is where ``ledger.toml`` and operator tasks come from when they are not beside
    the journal (``--no-save`` runs against a temporary ledger). ``resolver`` (picklable, sent
    to the workers) replaces the node's DNS for the agents' model API endpoints, e.g.
    ``functools.partial(attempt.static_resolver, {...})``.
    """
    progress = progress or NullProgress()
    source = source or home
    cfg = load_config(source.config_path)
    if request.agent_base_url:
        cfg = cfg.with_agent_base_url(request.agent_base_url)
    if executor_factory is None:
        executor_factory = functools.partial(
            make_executor, ray_address=request.ray_address or cfg.run.ray_address)
    with Session.open(home) as session:
        if request.resume:
            plan, unreported = resume_plan(source, session.journal, request, cfg)
            coordinator = Coordinator(home, session, plan, cfg, request, progress,
                                      executor_factory, source)
            coordinator.resolver = resolver
            finished = _finished(plan.prior)
            coordinator.attach()
            if (finished and not plan.slots and not unreported
                    and not coordinator.attestation.unattested()):
                # a finished run with nothing left: append nothing (no run.resumed, no second
                # run.finished), so the run's entries stay what they were
                progress.note(f"run {plan.run_id} is finished and has nothing left to run: "
                              "nothing was appended")
                return RunSummary(plan.run_id, "finished", True, [], session.checkpoint(),
                                  session.journal.size, home.path)
            session.resume([s.attempt_id(plan.run_id) for s in plan.slots],
                           {attempt_id: _task_of(attempt_id) for attempt_id in unreported})
        else:
            check_available(executor_kind(request, cfg))  # refused before run.started is written
            plan = fresh_plan(source, session.journal, request, cfg, now(), rng)
            for note in plan.notes:
                progress.note(note)
            coordinator = Coordinator(home, session, plan, cfg, request, progress,
                                      executor_factory, source)
            coordinator.resolver = resolver
            coordinator.start()
        return coordinator.run()
