"""One attempt, worker side: a picklable ``AttemptPlan`` in, ``AttemptEvent``s streamed out.

The attempt is a pipeline of steps, each a module of this package:

    prepare   (prepare.py)   load task (hash must match the plan), resolve agent, workspace:
                             fresh worktree, fresh git history (ground truth stays outside)
              commitment      ---> emitted BEFORE the agent starts
              canary.commitment    (the attempt's canaries, committed by item; canaries.py)
              test.baseline   ---> the regression command, before the agent (commands.py)
              grading.expected     the hidden test ids, fixed before the agent (expected.py)
    agent     (agent.py)     agent.started, activity..., agent.finished
    collect                  diff (taken right after the agent, before the hidden tests entered)
    grade     (grade.py)     hidden tests copied in as tests_hidden/ (only now), canaries written
                             over them; signal.result*, (signal canaries), test.result (hidden,
                             real tests only), canary.result, test.result (regression)
              attempt.finished                                            (pipeline.py)

Every text captured from the agent or the tests passes the attempt's redactor (built from the
ground-truth commitment) before it is emitted, so no hidden test or solution text reaches the
journal. ``agent.started`` reports the folders the attempt used (worktree, home, scratch), what
the agent may read besides system paths (interpreter, harness, its own program files) and its
model API endpoints, resolved on this node just before the agent starts (endpoints.py: every
host at once, 2 s in all; a failure or a timeout is recorded, never waited out). The
coordinator's attestation scan takes its scope from there: it allows exactly those folders, names
and addresses. Commands that the task calls ``python`` run with ``sys.executable``. The
coordinator stops an attempt by raising ``AttemptStopped`` in this process (see
executors/protocol.py); clean-up then kills whatever the attempt started and the attempt still
reports ``attempt.finished``.
"""

from __future__ import annotations

from ledger.agents.contracts import no_filter
from ledger.run.attempt.agent import agent_readable, harness_readable
from ledger.run.attempt.commands import (
    python_argv,
    run_signal,
    run_suite,
)
from ledger.run.attempt.endpoints import (
    agent_endpoints,
    resolve_endpoints,
    static_resolver,
    system_resolver,
)
from ledger.run.attempt.events import sandbox_failed_data
from ledger.run.attempt.pipeline import run_attempt
from ledger.run.attempt.prepare import load_plan_task, task_programs

_task_programs = task_programs  # the name ledger/tasks/isolation.py imports (until it moves)

__all__ = ["run_attempt", "run_suite", "run_signal", "python_argv", "no_filter",
           "resolve_endpoints", "system_resolver", "static_resolver", "agent_endpoints",
           "agent_readable", "harness_readable", "load_plan_task", "task_programs",
           "sandbox_failed_data"]
