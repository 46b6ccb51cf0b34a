"""Pure projections of journal entries: the golden score, failure taxonomy, offline judge,
replay and compare. No I/O, clock, randomness or environment; see docs/SCORING.md.

    compute_views(entries, run_id) -> dict        evaluators.views
    replay(entries, run_id) -> ReplayResult       evaluators.views
    compare(views_a, views_b) -> dict             evaluators.compare
    offline_verdict(facts) -> dict                evaluators.judge
    attempt_facts_from_entries(entries) -> dict   evaluators.facts
    fold(state, entry) -> state                   evaluators.fold
    leaderboard_from_entries(entries) -> dict     evaluators.leaderboard (the bench; its judge
                                                  verdict parsing in bench_judge, responses)
    REGISTRY, replay_run(entries, run_id)         evaluators.registry: one Evaluator shape (name,
                                                  version, kinds, start/fold/view, replay)
"""
