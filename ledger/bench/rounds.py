"""The rounds of a bench: code, corpus checks, reviews and revisions, tests, static checks,
judging. Agents and checks run in worker threads; every result is appended by the calling
thread through the bench's ``JournalWriter`` (``Rounds.append``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from evaluators import bench_judge as jd
from evaluators.facts import STUB_MARK, TODO_MARK
from evaluators.responses import code_files, language_of
from ledger.bench.calls import PROMPT_LIMIT, TEXT_LIMIT, CallResult, call_agent
from ledger.bench.checks import corpus_check, discover_tools, run_agent_tests, static_checks
from ledger.bench.confine import Confinement
from ledger.bench.inputs import BenchTask
from ledger.bench.options import BenchOptions, Say
from ledger.bench.panel import Contestant
from ledger.home import LedgerHome
from ledger.session import JournalWriter
from ledger.textbound import bound_text

NOT_STORED = "[task text not stored: --no-snapshot]"


class Rounds:
    """The rounds of one bench, each dispatched to a thread pool; only the thread that
    calls ``run`` appends."""
    def __init__(self, home: LedgerHome, writer: JournalWriter, task: BenchTask, opts: BenchOptions,
                 run_id: str, seed: int, contestants: list[Contestant], judges: list[Contestant],
                 fallback: bool, progress: Say, pricing: Mapping[str, Any] | None,
                 confine: Confinement) -> None:
        self.home, self.writer, self.task, self.opts = home, writer, task, opts
        self.confine = confine  # every agent call and check runs in its boxes
        self._kinds = {id(c.agent): c.kind for c in [*contestants, *judges]}
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

    def submit_call(self, agent: Any, name: str, round_name: str, prompt: str
                    ) -> Future[CallResult]:
        """One agent call in a worker thread, in its box."""
        return self.pool.submit(call_agent, agent, name, round_name, prompt, run_id=self.run_id,
                                timeout_s=self.opts.timeout_s, pricing=self.pricing,
                                confine=self.confine, kind=self._kinds.get(id(agent), "cli"))

    # -- generic parallel dispatch ---------------------------------------------------------

    def dispatch(self, jobs: list[tuple[Any, str, str, str]], label: str
                 ) -> list[CallResult]:
        """Run ``(agent, name, round, prompt)`` jobs in parallel; journal each as it finishes."""
        futures: dict[Future[CallResult], tuple[str, str]] = {}
        for agent, name, round_name, prompt in jobs:
            futures[self.submit_call(agent, name, round_name, prompt)] = (name, round_name)
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
                                 self.opts.check_timeout_s, self.confine): k for k in todo}
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
            self.submit_call(self.by_name[rev].agent, rev, f"review-{round_name}", p): (author, rev)
            for author, rev, p in jobs}
        critiques: dict[str, list[str]] = {}
        for i, fut in enumerate(as_completed(futs), 1):
            author, rev = futs[fut]
            res = fut.result()
            text, cut, total = bound_text(res.text, TEXT_LIMIT, tail=0.1, unit="chars")
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
                                  self.opts.check_timeout_s, self.confine)] = agent
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
                                  self.opts.check_timeout_s, self.confine)] = agent
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
                    prompt, cut, total = bound_text(stored, PROMPT_LIMIT, tail=0.1, unit="chars")
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
            futs[self.submit_call(panel[judge_name].agent, judge_name, f"judge-{round_name}",
                                  prompt)] = record
        for i, fut in enumerate(as_completed(futs), 1):
            record = futs[fut]
            res = fut.result()
            text, cut, total = bound_text(res.text, TEXT_LIMIT, tail=0.1, unit="chars")
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


__all__ = ["NOT_STORED", "Rounds"]
