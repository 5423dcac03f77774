"""Best-of-N over the candidates of an output folder: score them with each PRM, estimate every
method's accuracy at N = 1, 2, 4, ... (labeler/evaluation/best_of_n.py), write the results.

OUT/bon/results.json (the document below), OUT/bon/curves.png (labeler/evaluation/bon_plot.py).
Methods: PRM selection with each aggregate of labeler/prm/solution_scores.py (min, product, last,
mean), PRM-weighted vote with each, majority vote, pass@N (the oracle) and a random candidate.

What the figures cannot measure is counted beside them: per PRM, the candidates it could not
fully score (they rank below every scored one; `candidates_unscored_by_reason`: past its max length,
the text holding the PRM's own step marker, a NaN score) and, per N, the share of problems whose N
candidates hold none it scored (`no_scored_candidate`); per method and N, the share of problems
counted wrong only for a candidate whose answer was not checked (`counted_wrong_unchecked`; the
candidates by reason in `candidates_unchecked`). That share is exactly how much higher the accuracy could
be for pass@N, random and PRM selection, and only a lower bound for majority and weighted votes (an
unchecked candidate that was right would also vote); `counted_wrong_unchecked_bound` says which.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from labeler.decoding.candidates import CandidateSet
from labeler.decoding.prm_scores import candidate_step_scores
from labeler.evaluation.best_of_n import MAJORITY, PASS, RANDOM, SELECT, VOTE, Curves, Pool, estimate, n_ladder
from labeler.evaluation.bon_plot import BON_CURVES, BON_RESULTS, curves_png
from labeler.prm.scorers import StepScorer
from labeler.prm.solution_scores import AGGREGATES, aggregate
from labeler.store.location import OutputLocation

RESULTS_VERSION = 2  # 2: counted_wrong_unchecked_bound
UNCHECKED_BOUND = {PASS: "exact", RANDOM: "exact", MAJORITY: "lower bound", "selection": "exact", "weighted_vote": "lower bound"}
ESTIMATOR_NOTE = (
    "expected accuracy over the subsets of N candidates of each problem's pool, averaged over problems: exact for pass@N, "
    "random and PRM selection (ties broken at random); votes over every subset when there are at most `subsets`, else over "
    "`subsets` random ones seeded by `seed`; a pool smaller than N is used whole (problems_capped)"
)


@dataclass(frozen=True)
class PrmToUse:
    spec: str
    load: Callable[[], StepScorer]  # called only when the PRM's scores are not kept yet
    scoring: dict  # the settings it scores with (labeler/decoding/prm_scores.py `scoring_settings`)


def score_names(index: int) -> dict[str, str]:
    """aggregate -> the score's name in the pools of PRM number `index`."""
    return {how: f"{index}/{how}" for how in AGGREGATES}


def build_pools(candidates: CandidateSet, scores: Sequence[dict[str, list[list[float | None]]]]) -> list[Pool]:
    """One pool per problem; `scores[i]` holds PRM i's step scores by solution_id."""
    pools = []
    for problem_id, members in candidates.pools().items():
        named = {}
        for index, by_id in enumerate(scores):
            for how, name in score_names(index).items():
                named[name] = tuple(aggregate(by_id[c.solution_id], how) for c in members)
        unchecked = tuple(c.unchecked_reason is not None for c in members)
        pools.append(Pool(problem_id, tuple(c.correct for c in members), tuple(c.answer_key for c in members), named, unchecked))
    return pools


def score_candidates(location: OutputLocation, candidates: CandidateSet, prms: Sequence[PrmToUse], rescore: bool = False):
    """Per PRM: its name, its step scores by solution_id, and why a candidate is not fully scored, by solution_id."""
    names, scores, reasons = [], [], []
    for prm in prms:
        name, step_scores, why = candidate_step_scores(
            location, prm.spec, candidates.candidates, prm.load, scoring=prm.scoring, rescore=rescore
        )
        names.append(name)
        scores.append({c.solution_id: s for c, s in zip(candidates.candidates, step_scores)})
        reasons.append({c.solution_id: r for c, r in zip(candidates.candidates, why)})
    return names, scores, reasons


def results_document(
    candidates: CandidateSet, prms: Sequence[str], names: Sequence[str], curves: Curves, unscored: Sequence[int], *, subsets: int, seed: int,
    unscored_by_reason: Sequence[dict[str, int]] | None = None,
) -> dict:  # fmt: skip
    """`unscored[i]`: the candidates PRM i could not fully score; `unscored_by_reason[i]`: the same, by reason."""
    sizes = [len(pool) for pool in candidates.pools().values()]
    accuracy, unknown = curves.accuracy, curves.unknown
    return {
        "kind": "best-of-n",
        "version": RESULTS_VERSION,
        "n": curves.n,
        "problems": curves.problems,
        "problems_capped": curves.problems_capped,
        "problems_without_candidates": candidates.problems_without_candidates,
        "rows_rejected": candidates.rows_rejected,
        "candidates": len(candidates.candidates),
        "candidates_correct": sum(c.correct for c in candidates.candidates),
        "candidates_unchecked": candidates.unchecked,
        "candidates_truncated": sum(c.truncated for c in candidates.candidates),
        "pool_size": {"min": min(sizes, default=0), "max": max(sizes, default=0)},
        "tokens_per_candidate": candidates.sampled_tokens_per_candidate,
        "estimator": {"subsets": subsets, "seed": seed, "how": ESTIMATOR_NOTE},
        "baselines": {name: accuracy[name] for name in (PASS, MAJORITY, RANDOM)},
        # per method and N, [low, high]: a 95% bootstrap interval over problems (labeler/evaluation/best_of_n.py)
        "baselines_ci95": {name: curves.ci95.get(name, []) for name in (PASS, MAJORITY, RANDOM)},
        "counted_wrong_unchecked": {name: unknown[name] for name in (PASS, MAJORITY, RANDOM)},
        "counted_wrong_unchecked_bound": UNCHECKED_BOUND,
        "prms": [
            {
                "spec": spec,
                "name": name,
                "selection": {how: accuracy[f"{SELECT}:{score}"] for how, score in score_names(index).items()},
                "weighted_vote": {how: accuracy[f"{VOTE}:{score}"] for how, score in score_names(index).items()},
                "selection_ci95": {how: curves.ci95.get(f"{SELECT}:{score}", []) for how, score in score_names(index).items()},
                "weighted_vote_ci95": {how: curves.ci95.get(f"{VOTE}:{score}", []) for how, score in score_names(index).items()},
                "candidates_unscored": unscored[index],
                "candidates_unscored_by_reason": (unscored_by_reason or [{}] * len(prms))[index],
                "no_scored_candidate": curves.unscored[score_names(index)["min"]],  # the same for every aggregate
                "counted_wrong_unchecked": {
                    "selection": {how: unknown[f"{SELECT}:{score}"] for how, score in score_names(index).items()},
                    "weighted_vote": {how: unknown[f"{VOTE}:{score}"] for how, score in score_names(index).items()},
                },
            }
            for index, (spec, name) in enumerate(zip(prms, names))
        ],
    }


def best_of_n(
    location: OutputLocation, candidates: CandidateSet, prms: Sequence[PrmToUse], *, subsets: int, seed: int,
    ns: Sequence[int] | None = None, rescore: bool = False,
) -> dict:  # fmt: skip
    """Score, estimate and return the results document (not written: `write_results`)."""
    names, scores, reasons = score_candidates(location, candidates, prms, rescore)
    pools = build_pools(candidates, scores)
    if ns is None:
        ns = n_ladder(max((pool.size for pool in pools), default=0))
    curves = estimate(pools, ns, subsets=subsets, seed=seed)
    unscored = [sum(aggregate(steps, "min") is None for steps in by_id.values()) for by_id in scores]
    by_reason = [
        dict(Counter(why[i] for i, steps in by_id.items() if aggregate(steps, "min") is None).most_common())
        for by_id, why in zip(scores, reasons)
    ]
    return results_document(
        candidates, [p.spec for p in prms], names, curves, unscored, subsets=subsets, seed=seed, unscored_by_reason=by_reason
    )


def write_results(location: OutputLocation, results: dict) -> dict[str, str]:
    location.make_dirs("bon")
    location.write_bytes(BON_RESULTS, json.dumps(results, indent=1).encode())
    location.write_bytes(BON_CURVES, curves_png(results))
    return {"results": location.display(BON_RESULTS), "curves": location.display(BON_CURVES)}


def at_n(results: dict, j: int) -> dict:
    """Every method's accuracy at the j-th N of a results document, in the document's shape."""
    return {
        "n": results["n"][j],
        "baselines": {name: values[j] for name, values in results["baselines"].items()},
        "prms": [
            {
                "spec": prm["spec"],
                "selection": {how: values[j] for how, values in prm["selection"].items()},
                "weighted_vote": {how: values[j] for how, values in prm["weighted_vote"].items()},
                "candidates_unscored": prm["candidates_unscored"],
                "no_scored_candidate": prm["no_scored_candidate"][j],
                "counted_wrong_unchecked": {
                    key: {how: values[j] for how, values in methods.items()} for key, methods in prm["counted_wrong_unchecked"].items()
                },
            }
            for prm in results["prms"]
        ],
        "counted_wrong_unchecked": {name: values[j] for name, values in results["counted_wrong_unchecked"].items()},
    }


def format_table(results: dict) -> str:
    """Methods as rows, N as columns."""
    ns = results["n"]
    width = max(28, *(len(p["name"]) + 2 for p in results["prms"])) if results["prms"] else 28
    lines = [
        f"best-of-N on {results['problems']} problems: {results['candidates']} candidates "
        f"(pools of {results['pool_size']['min']} to {results['pool_size']['max']}), {results['candidates_correct']} correct",
        f"{'N':<{width}}" + "".join(f"{n:>8}" for n in ns),
    ]

    def row(label: str, values: Sequence[float]) -> str:
        return f"{label:<{width}}" + "".join(f"{'n/a' if math.isnan(v) else f'{v:.3f}':>8}" for v in values)

    for name, label in ((PASS, "pass@N (oracle)"), (MAJORITY, "majority vote"), (RANDOM, "random")):
        lines.append(row(label, results["baselines"][name]))
    for prm in results["prms"]:
        lines.append(prm["name"])
        lines += [row(f"  select by {how}", values) for how, values in prm["selection"].items()]
        lines += [row(f"  weighted vote by {how}", values) for how, values in prm["weighted_vote"].items()]
    if any(results["problems_capped"]):
        capped = ", ".join(f"N={n}: {c}" for n, c in zip(ns, results["problems_capped"]) if c)
        lines.append(f"problems with a smaller pool, evaluated on all their candidates: {capped}")
    lines += unmeasured_lines(results, row)
    return "\n".join(lines)


def unmeasured_lines(results: dict, row: Callable[[str, Sequence[float]], str]) -> list[str]:
    """What the table could not measure: candidates not fully scored, answers not checked (module docstring)."""
    lines = []
    for prm in results["prms"]:
        if prm["candidates_unscored"]:
            reasons = "; ".join(f"{reason}: {count}" for reason, count in prm.get("candidates_unscored_by_reason", {}).items())
            lines.append(f"{prm['name']}: {prm['candidates_unscored']} candidates not fully scored ({reasons}), ranked last")
            lines.append(row("  problems with none scored", prm["no_scored_candidate"]))
    unchecked = results["candidates_unchecked"]
    if unchecked:
        reasons = "; ".join(f"{reason}: {count}" for reason, count in sorted(unchecked.items()))
        lines.append(f"candidates whose answer was not checked, counted wrong: {sum(unchecked.values())} ({reasons})")
        lines.append(
            "share of problems counted wrong only for one of them (how much higher the accuracy could be; for the votes: "
            "a lower bound, a right one would also vote):"
        )
        wrong = results["counted_wrong_unchecked"]
        lines += [row(label, wrong[name]) for name, label in ((PASS, "pass@N (oracle)"), (MAJORITY, "majority vote"), (RANDOM, "random"))]
        for prm in results["prms"]:
            lines.append(prm["name"])
            for key, kind in (("selection", "select by"), ("weighted_vote", "weighted vote by")):
                lines += [row(f"  {kind} {how}", values) for how, values in prm["counted_wrong_unchecked"][key].items()]
    return lines
