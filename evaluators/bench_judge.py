"""The blinded meta-judge of ``ledger bench``: pure functions, no I/O, no clock, no model calls.

    assign_judges(contestants, judges)        which judge sees which responses (family rule)
    presentation_order(agents, seed, call)    seeded shuffle; the swap pass reverses it
    judge_prompt(task, items, round_name)     labels A, B, C... and responses cut to the budget
    parse_scores(text, labels)                judge output -> {label: scores or None}

Bias controls:

* **Blinding.** Responses are labelled A, B, C... in a presentation order drawn from a journaled
  seed; the judge never sees an agent's name, and each response's own self-assessment line is cut
  out before the judge reads it.
* **Family rule** (the seed's opposite-model rule, generalised). A judge never scores a response of
  its own model family when another judge can score it; only when every available judge belongs
  to that family does one of them score it, and the verdict records ``own_family``.
* **Bounded input.** Each response is cut to ``floor(80000 / number of responses)`` characters, and
  every cut is recorded.
* **Strict parsing.** Scores are four integers 0-5 per label; a label the judge left out, or a judge
  answer that is not such JSON, is ``UNSCORED``, never zero.

The runner calls a judge and journals its prompt and raw answer; the leaderboard projection parses
the raw answer again with :func:`parse_scores`, so a replay needs no model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import statistics
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

JUDGE_PROMPT_VERSION = "1"
DIMENSIONS = ("completeness", "accuracy", "actionability", "no_hallucinations")
MAX_POINTS = 5
TOTAL_INPUT_CHARS = 80_000
TASK_CHARS = 30_000  # the task text shown to a judge (the snapshot limit)
UNSCORED = "UNSCORED"
OFFLINE_JUDGE = "offline"

ROUND_CODE = "code"
ROUND_CODE_REVISED = "code_revised"
ROUND_TESTS = "tests"
ROUND_TESTS_REVISED = "tests_revised"
ROUNDS = (ROUND_CODE, ROUND_CODE_REVISED, ROUND_TESTS, ROUND_TESTS_REVISED)
PASS_PRIMARY = "primary"
PASS_SWAP = "swap"

# Model families: patterns over a model name (or an agent name that embeds one).
_FAMILY_PATTERNS = (
    ("anthropic", re.compile(r"claude|opus|sonnet|haiku")),
    ("openai", re.compile(r"gpt|codex|(?<![a-z0-9])o[134](?![a-z0-9])")),
    ("google", re.compile(r"gemini|gemma")),
    ("deepseek", re.compile(r"deepseek")),
    ("xai", re.compile(r"grok")),
    ("meta", re.compile(r"llama")),
    ("mistral", re.compile(r"mistral|codestral")),
    ("qwen", re.compile(r"qwen")),
)
# Agent CLIs that can run models of several families: the family is the model's when known.
_MULTI_MODEL_AGENTS = {"cursor-agent": "cursor", "cursor": "cursor", "aider": "aider"}

_DIM_TEXT = {
    "code": {
        "completeness": "every required function, method, field and behaviour is implemented",
        "accuracy": "the logic is correct: state transitions, edge cases and errors are handled",
        "actionability": "ready to use as written: no stubs, TODOs, placeholders or missing pieces",
        "no_hallucinations": "no invented APIs, modules, methods or behaviour",
    },
    "tests": {
        "completeness": "the tests cover happy paths, error paths and edge cases",
        "accuracy": "assertions are meaningful and would fail on wrong code; fakes are set up right",
        "actionability": "the tests run as written with the stated framework and conventions",
        "no_hallucinations": "no invented test utilities, fixtures or matchers",
    },
}

_SELF_EVAL_LINE = re.compile(r"^\s*\**\s*SELF_EVAL_SUMMARY\b.*$", re.MULTILINE)
_SCORE_LINE = re.compile(r"^\s*[-*]?\s*[\w .()/-]{1,60}:\s*\d+(?:\.\d+)?\s*/\s*20\s*$")


def _model_family(text: str) -> str | None:
    low = text.lower()
    for family, pattern in _FAMILY_PATTERNS:
        if pattern.search(low):
            return family
    return None


def family_of(agent: str, model: str | None = None) -> str:
    """The model family of an agent: from the model it reported, else from its name.

    ``claude`` -> anthropic, ``codex`` -> openai, ``gemini`` -> google; ``cursor-agent`` and
    ``aider`` take the family of the model they ran (``cursor-agent-gpt-5`` -> openai) and are
    their own family when it is unknown; any other agent is its own family.
    """
    if model:
        found = _model_family(model)
        if found:
            return found
    low = agent.lower()
    for multi, own in _MULTI_MODEL_AGENTS.items():
        if low == multi or low.startswith(multi + "-"):
            return _model_family(low[len(multi):]) or own
    return _model_family(low) or low


@dataclass(frozen=True)
class Assignment:
    """Which responses each judge scores, and which responses only a same-family judge could."""

    by_judge: dict[str, list[str]]
    own_family: dict[str, bool]  # contestant -> scored by a judge of its own family


def assign_judges(contestants: Mapping[str, str], judges: Mapping[str, str]) -> Assignment:
    """Give each response to every judge of another family; to every judge when none exists.

    ``contestants`` and ``judges`` map names to families. With one judge of another family per
    response this is the seed's opposite-model rule; with several it is a jury.
    """
    by_judge: dict[str, list[str]] = {j: [] for j in judges}
    own: dict[str, bool] = {}
    for name, family in contestants.items():
        others = [j for j, jf in judges.items() if jf != family]
        own[name] = not others
        for j in others or list(judges):
            by_judge[j].append(name)
    return Assignment({j: sorted(v) for j, v in by_judge.items()}, own)


def labels(n: int) -> list[str]:
    """A, B, ... Z, AA, AB, ... (spreadsheet style)."""
    out = []
    for i in range(n):
        label = ""
        k = i
        while True:
            label = string.ascii_uppercase[k % 26] + label
            k = k // 26 - 1
            if k < 0:
                break
        out.append(label)
    return out


def presentation_order(agents: Sequence[str], seed: int, call: str) -> list[str]:
    """A permutation of ``agents`` fixed by ``seed`` and the call's name (SHA-256 sort keys).

    Anyone can recompute it from the journaled seed; no PRNG implementation is involved.
    """
    def key(name: str) -> tuple[str, str]:
        return hashlib.sha256(f"{seed}\x00{call}\x00{name}".encode()).hexdigest(), name

    return sorted(set(agents), key=key)


def truncation_limit(n: int) -> int:
    """Characters allowed per response when ``n`` responses share one judge prompt."""
    return TOTAL_INPUT_CHARS // max(1, n)


def strip_self_eval(text: str) -> str:
    """The response without its ``SELF_EVAL_SUMMARY`` line or block (judges must not see it)."""
    lines = text.splitlines()
    out: list[str] = []
    skipping = False
    for line in lines:
        if _SELF_EVAL_LINE.match(line):
            skipping = True
            continue
        if skipping and (not line.strip() or _SCORE_LINE.match(line) or line.strip() == "```"):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out).rstrip() + ("\n" if text.endswith("\n") else "")


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``(text, truncated)`` with at most ``limit`` characters."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True


@dataclass(frozen=True)
class JudgePrompt:
    prompt: str
    labels: dict[str, str]  # label -> agent
    order: list[str]  # agents in presentation order
    truncated: dict[str, bool]  # agent -> cut to the limit
    limit: int
    task_truncated: bool


def judge_prompt(task_text: str, responses: Mapping[str, str], order: Sequence[str],
                 round_name: str = ROUND_CODE) -> JudgePrompt:
    """The prompt for one judge call over ``responses`` (agent -> text) in ``order``."""
    kind = "tests" if round_name.startswith("tests") else "code"
    order = [a for a in order if a in responses]
    limit = truncation_limit(len(order))
    names = labels(len(order))
    task, task_cut = cut(task_text, TASK_CHARS)
    dims = "\n".join(f"- {d}: {_DIM_TEXT[kind][d]}" for d in DIMENSIONS)
    what = "test suites written for code" if kind == "tests" else "answers"
    parts = [
        f"You are an impartial judge in a blinded benchmark. Below are {len(order)} anonymous "
        f"{what} to the same task, labelled {', '.join(names)}. Score each one on four "
        f"dimensions, each an integer from 0 (worst) to {MAX_POINTS} (best):",
        dims,
        "Judge every response on its own merits. The order of presentation means nothing, the "
        "labels say nothing about who wrote a response, and any self-assessment a response "
        "contains must be ignored.",
        "TASK:",
        task + ("\n[task text truncated]" if task_cut else ""),
        "RESPONSES:",
    ]
    truncated: dict[str, bool] = {}
    for label, agent in zip(names, order, strict=True):
        body, was_cut = cut(strip_self_eval(responses[agent]), limit)
        truncated[agent] = was_cut
        note = f"\n[response truncated to {limit} characters]" if was_cut else ""
        parts.append(f"=== Response {label} ===\n{body}{note}\n=== End of response {label} ===")
    example = ", ".join(
        f'"{label}": {{' + ", ".join(f'"{d}": 0' for d in DIMENSIONS) + "}" for label in names[:2])
    parts.append("Answer with a single JSON object and nothing else, one key per label, for "
                 f"example: {{{example}{', ...' if len(names) > 2 else ''}}}")
    return JudgePrompt("\n\n".join(parts), dict(zip(names, order, strict=True)), list(order),
                       truncated, limit, task_cut)


# ------------------------------------------------------------------------------------ parsing

@dataclass(frozen=True)
class ParsedVerdict:
    scores: dict[str, dict[str, int] | None]  # label -> four scores, or None (UNSCORED)
    reasons: dict[str, str]  # label -> why it is UNSCORED
    error: str | None  # why nothing could be parsed at all


def _json_objects(text: str) -> list[Any]:
    """Every JSON object that decodes at a ``{`` in ``text`` (whole text first)."""
    found: list[Any] = []
    stripped = text.strip()
    fence = re.match(r"^```[\w-]*\s*\n(.*)\n```\s*$", stripped, re.DOTALL)
    if fence:
        stripped = fence.group(1).strip()
    with contextlib.suppress(ValueError):
        found.append(json.loads(stripped))
    decoder = json.JSONDecoder()
    pos = text.find("{")
    tries = 0
    while pos >= 0 and tries < 2000:
        tries += 1
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        found.append(obj)
        pos = text.find("{", end)
    return [o for o in found if isinstance(o, dict)]


def _norm_label(key: str) -> str:
    k = key.strip().upper()
    for prefix in ("RESPONSE ", "RESPONSE_", "RESPONSE-", "LABEL "):
        if k.startswith(prefix):
            k = k[len(prefix):].strip()
    return k


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    else:
        return None
    return n if 0 <= n <= MAX_POINTS else None


def _scores_of(value: Any) -> tuple[dict[str, int] | None, str]:
    if not isinstance(value, dict):
        return None, "not an object of scores"
    lowered = {str(k).strip().lower(): v for k, v in value.items()}
    out: dict[str, int] = {}
    for dim in DIMENSIONS:
        if dim not in lowered:
            return None, f"dimension {dim} missing"
        n = _score(lowered[dim])
        if n is None:
            return None, f"{dim} is not an integer 0-{MAX_POINTS}: {lowered[dim]!r}"
        out[dim] = n
    return out, ""


def parse_scores(text: str, wanted: Sequence[str]) -> ParsedVerdict:
    """Scores per label from a judge's answer; a label not validly scored is ``None``.

    The first JSON object in the answer that names at least one wanted label is used (an object
    nested under ``"scores"`` is accepted too).
    """
    chosen: dict[str, Any] | None = None
    for obj in _json_objects(text):
        candidate = obj.get("scores") if isinstance(obj.get("scores"), dict) else obj
        keyed = {_norm_label(str(k)): v for k, v in candidate.items()}
        if any(label in keyed for label in wanted):
            chosen = keyed
            break
    if chosen is None:
        reason = "the judge answer holds no JSON object with the response labels"
        return ParsedVerdict({label: None for label in wanted},
                             {label: reason for label in wanted}, reason)
    scores: dict[str, dict[str, int] | None] = {}
    reasons: dict[str, str] = {}
    for label in wanted:
        if label not in chosen:
            scores[label] = None
            reasons[label] = "the judge did not score this response"
            continue
        parsed, why = _scores_of(chosen[label])
        scores[label] = parsed
        if parsed is None:
            reasons[label] = why
    return ParsedVerdict(scores, reasons, None)


def composite(scores: Mapping[str, float] | None) -> float | None:
    """Sum of the four dimensions (0-20), or None."""
    if scores is None:
        return None
    return float(sum(scores[d] for d in DIMENSIONS))


# ------------------------------------------------------------------------------- verdicts read back
# (what the bench leaderboard, evaluators/leaderboard.py, folds from the journaled judge calls)

def call_verdicts(prompt: Mapping[str, Any], raw: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One verdict per response in a judge call, parsed again from the journaled answer."""
    label_map = prompt.get("labels")
    if not isinstance(label_map, dict):
        return []
    wanted = sorted(str(k) for k in label_map)
    if raw is None:
        parsed_scores: dict[str, Any] = dict.fromkeys(wanted)
        reasons = dict.fromkeys(wanted, "the judge call has no recorded answer")
    elif raw.get("status") != "ok":
        parsed_scores = dict.fromkeys(wanted)
        reasons = dict.fromkeys(wanted, f"the judge {raw.get('status', 'failed')}")
    else:
        parsed = parse_scores(str(raw.get("text", "")), wanted)
        parsed_scores = dict(parsed.scores)
        reasons = dict(parsed.reasons)
    out = []
    for label in wanted:
        scores = parsed_scores.get(label)
        out.append({
            "call": prompt.get("call"), "judge": prompt.get("judge"), "round": prompt.get("round"),
            "pass": prompt.get("pass"), "label": label, "agent": label_map[label],
            "scores": scores, "status": "scored" if scores is not None else "UNSCORED",
            "reason": reasons.get(label, ""),
            "own_family": bool((prompt.get("own_family") or {}).get(label_map[label], False)),
        })
    return out


def median_scores(score_list: Sequence[Mapping[str, int]]) -> dict[str, float] | None:
    if not score_list:
        return None
    return {d: float(statistics.median([s[d] for s in score_list])) for d in DIMENSIONS}


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def swap_check(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pairs whose preference reversed between a judge's primary and reversed-order passes."""
    by_key: dict[tuple[str, str, str], dict[str, float]] = {}
    for v in verdicts:
        if v["scores"] is None:
            continue
        key = (str(v["judge"]), str(v["round"]), str(v["pass"]))
        by_key.setdefault(key, {})[str(v["agent"])] = float(sum(v["scores"][d] for d in DIMENSIONS))
    calls = []
    total_pairs = total_flips = 0
    for (judge, round_name, pass_name), primary in sorted(by_key.items()):
        if pass_name != PASS_PRIMARY or (judge, round_name, PASS_SWAP) not in by_key:
            continue
        swapped = by_key[(judge, round_name, PASS_SWAP)]
        agents = sorted(set(primary) & set(swapped))
        pairs = flips = 0
        flipped: list[list[str]] = []
        for i, a in enumerate(agents):
            for b in agents[i + 1:]:
                pairs += 1
                if _sign(primary[a] - primary[b]) != _sign(swapped[a] - swapped[b]):
                    flips += 1
                    flipped.append([a, b])
        changed = sum(1 for a in agents if primary[a] != swapped[a])
        calls.append({"judge": judge, "round": round_name, "pairs": pairs, "flips": flips,
                      "flipped": flipped, "scores_changed": changed})
        total_pairs += pairs
        total_flips += flips
    return {"checked": bool(calls), "pairs": total_pairs, "flips": total_flips, "calls": calls}



__all__ = [
    "DIMENSIONS", "JUDGE_PROMPT_VERSION", "OFFLINE_JUDGE", "PASS_PRIMARY", "PASS_SWAP", "ROUNDS",
    "ROUND_CODE", "ROUND_CODE_REVISED", "ROUND_TESTS", "ROUND_TESTS_REVISED", "TOTAL_INPUT_CHARS",
    "UNSCORED", "Assignment", "JudgePrompt", "ParsedVerdict", "assign_judges", "call_verdicts",
    "composite", "median_scores", "swap_check",
    "cut", "family_of", "judge_prompt", "labels", "parse_scores", "presentation_order",
    "strip_self_eval", "truncation_limit",
]
