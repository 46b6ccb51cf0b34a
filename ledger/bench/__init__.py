"""``ledger bench``: one task to several agents in parallel, a blinded meta-judge, a leaderboard.

Pure parts (no I/O, no clock): ``judge`` (blinding, family rule, prompt, score parsing),
``responses`` (answers out of CLI output, files out of answers), ``leaderboard`` (the view as a
projection of the run's entries). I/O parts: ``inputs`` (task text), ``checks`` (tests, static
checks, corpus checks), ``runner`` (``run_bench``: the bench's session and its life cycle),
``rounds`` (the rounds, dispatched to worker threads), ``calls`` (one agent call), ``panel``
(contestants and judges), ``options``, ``compare``.
docs/bench.md describes the command and every entry kind it writes.
"""
