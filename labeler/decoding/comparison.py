"""`labeler search`'s results: the search's accuracy and tokens, beside best-of-N at equal tokens.

Equal tokens, from the same run's counts: the search generated T tokens per problem (every
proposal, kept or not); a sampled candidate cost t tokens on average; best-of-N at N* = round(T/t)
(at least 1) costs about what the search cost. Every best-of-N method is estimated at N* on the
candidates scored by the same PRM (labeler/decoding/reranking.py); when N* is larger than the pool,
the pool's size is used and the result says `capped`. Prompt tokens are counted by neither.

The search's accuracy counts as wrong a problem whose answer could not be checked; `counted_wrong_unchecked`
says how many and why (its chosen beam did not end on its own: cut, step_limit, ...; no beam; the
check's verdict: timeout, unparseable), and `chosen_unscored` how many chosen beams the PRM could not
fully score (the search chooses among the finished beams first, so one is chosen only when none of its
problem's finished beams was scored, or none finished and none of the kept beams was). The best-of-N figures
carry their own counts (labeler/decoding/reranking.py).

OUT/search/results.json: the document of `search_results`; OUT/search/problems.jsonl: per problem
its answer, verdict, tokens and every round's candidates (their step text, tokens, score, whether
kept); OUT/search/comparison.png: the best-of-N curves of the PRM with the search at equal tokens.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from labeler.checking.verdicts import Verdict
from labeler.decoding.beam_search import ENDED_ON_ITS_OWN, ProblemSearch, SearchProblem, SearchSettings
from labeler.decoding.candidates import read_candidates
from labeler.decoding.config import BestOfNConfig, SearchConfig
from labeler.decoding.reranking import PrmToUse, at_n, best_of_n
from labeler.evaluation.best_of_n import n_ladder
from labeler.evaluation.bon_plot import SEARCH_PLOT, SEARCH_PROBLEMS, SEARCH_RESULTS, curves_png, search_point
from labeler.labeling.config import LabelConfig
from labeler.labeling.job import JobPlan
from labeler.prm.scorers import StepScorer
from labeler.store.location import OutputLocation

SEARCH_DIR = "search"


def search_problems(plan: JobPlan) -> list[SearchProblem]:
    """Each problem of the input once, in input order (rows with solutions too: only their problem is used)."""
    problems: dict[str, SearchProblem] = {}
    for unit in plan.units:
        for row in unit.rows:
            source = row.source
            problems.setdefault(source.problem_id, SearchProblem(source.problem_id, source.problem, source.reference_answer))
    return list(problems.values())


def search_results(
    location: OutputLocation,
    searches: Sequence[ProblemSearch],
    plan: JobPlan,
    config: SearchConfig,
    settings: SearchSettings,
    scorer: StepScorer,
    bon: BestOfNConfig | None,
    job: LabelConfig,
    scoring: dict,
) -> dict:
    """`scoring`: the settings `scorer` scores with (labeler/decoding/prm_scores.py `scoring_settings`)."""
    problems = len(searches)
    correct = sum(search.correct for search in searches)
    tokens = sum(search.generated_tokens for search in searches)
    results = {
        "kind": "beam-search",
        "version": 1,
        "problems": problems,
        "correct": correct,
        "accuracy": correct / problems if problems else None,
        "generated_tokens": tokens,
        "tokens_per_problem": tokens / problems if problems else None,
        "requests": sum(search.requests for search in searches),
        "proposals": sum(search.proposals for search in searches),
        "rounds": max((len(search.rounds) for search in searches), default=0),
        "finished_by": dict(Counter(search.chosen.status if search.chosen else "nothing" for search in searches)),
        "problems_with_errors": sum(search.error is not None for search in searches),
        "counted_wrong_unchecked": dict(Counter(reason for reason in map(unchecked_reason, searches) if reason is not None)),
        "chosen_unscored": sum(search.chosen is not None and search.chosen.score is None for search in searches),
        "rows_rejected": len(plan.rejected),
        "prm": {"spec": config.prm, "name": scorer.name},
        "settings": {
            **{key: value for key, value in config.to_dict().items() if key != "prm"},
            "seed": settings.seed,
            "temperature": job.temperature,
            "top_p": job.top_p,
            "model": job.model,
        },
        "best_of_n": None,
    }
    if bon is not None and problems:
        prm = PrmToUse(config.prm, lambda: scorer, scoring)
        results["best_of_n"] = equal_tokens(location, results["tokens_per_problem"], prm, bon, job.seed)
    return results


def unchecked_reason(search: ProblemSearch) -> str | None:
    """Why a problem counted wrong has no checked answer; None when it is correct or its answer was checked wrong."""
    if search.correct:
        return None
    if search.chosen is None:
        return "no beam"
    if search.chosen.status not in ENDED_ON_ITS_OWN:
        return search.chosen.status
    return None if search.verdict == Verdict.INCORRECT.value else f"verdict {search.verdict}"


def equal_tokens(location: OutputLocation, search_tokens: float, prm: PrmToUse, bon: BestOfNConfig, seed: int) -> dict:
    candidates = read_candidates(location.uri)
    per_candidate = candidates.sampled_tokens_per_candidate
    if per_candidate is None:
        return {"skipped": "the input gave every candidate: their generated tokens are unknown"}
    largest = max(len(pool) for pool in candidates.pools().values())
    wanted = max(1, round(search_tokens / per_candidate))
    n = min(wanted, largest)
    ns = sorted(set(n_ladder(largest)) | {n})
    curves = best_of_n(location, candidates, [prm], subsets=bon.subsets, seed=seed, ns=ns, rescore=bon.rescore)
    return {
        "n_equal_tokens": wanted,
        "n": n,
        "capped": wanted > largest,
        "tokens_per_candidate": per_candidate,
        "tokens_per_problem": n * per_candidate,
        "at_equal_tokens": at_n(curves, ns.index(n)),
        "curves": curves,
    }


def write_search(location: OutputLocation, results: dict, searches: Sequence[ProblemSearch]) -> dict[str, str]:
    location.make_dirs(SEARCH_DIR)
    location.write_bytes(SEARCH_RESULTS, json.dumps(results, indent=1).encode())
    location.write_bytes(SEARCH_PROBLEMS, "".join(json.dumps(search.summary()) + "\n" for search in searches).encode())
    files = {"results": location.display(SEARCH_RESULTS), "problems": location.display(SEARCH_PROBLEMS)}
    bon = results.get("best_of_n") or {}
    if "curves" in bon:
        location.write_bytes(SEARCH_PLOT, curves_png(bon["curves"], search=search_point(results)))
        files["plot"] = location.display(SEARCH_PLOT)
    return files


def format_summary(results: dict) -> str:
    settings = results["settings"]
    accuracy = "n/a" if results["accuracy"] is None else f"{results['accuracy']:.3f}"
    tokens = "n/a" if results["tokens_per_problem"] is None else f"{results['tokens_per_problem']:.1f}"
    lines = [
        f"beam search, B={settings['beams']} K={settings['proposals']}, up to {settings['max_steps']} steps, ranked by "
        f"{settings['aggregate']} of {results['prm']['name']}",
        f"  accuracy {accuracy} ({results['correct']} of {results['problems']} problems), {tokens} generated tokens per problem",
        f"  chosen beams ended by: {', '.join(f'{k} {v}' for k, v in sorted(results['finished_by'].items()))}",
    ]
    unchecked = results["counted_wrong_unchecked"]
    if unchecked:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(unchecked.items()))
        lines.append(f"  counted wrong without a checked answer: {sum(unchecked.values())} problems ({reasons})")
    if results["chosen_unscored"]:
        lines.append(
            "  chosen beams the PRM could not fully score (none of their problem's finished beams was scored; where none "
            f"finished, none of its kept beams): {results['chosen_unscored']}"
        )
    bon = results["best_of_n"]
    if bon is None:
        return "\n".join(lines)
    if "skipped" in bon:
        return "\n".join([*lines, f"best-of-N at equal tokens: skipped ({bon['skipped']})"])
    capped = f" (the pool holds {bon['n']}: {bon['n_equal_tokens']} would match)" if bon["capped"] else ""
    at = bon["at_equal_tokens"]
    prm = at["prms"][0]
    lines += [
        f"best-of-N at equal tokens: N={bon['n']}{capped}, {bon['n']} x {bon['tokens_per_candidate']:.1f} = "
        f"{bon['tokens_per_problem']:.1f} tokens per problem",
        "  PRM selection by " + ", ".join(f"{how} {value:.3f}" for how, value in prm["selection"].items()),
        "  PRM-weighted vote by " + ", ".join(f"{how} {value:.3f}" for how, value in prm["weighted_vote"].items()),
        "  majority vote {majority:.3f}, pass@N {pass:.3f}, random {random:.3f}".format(**at["baselines"]),
    ]
    if prm["candidates_unscored"]:
        lines.append(
            f"  {prm['candidates_unscored']} candidates not fully scored by the PRM (ranked below every scored one); "
            f"problems whose N candidates hold none scored: {prm['no_scored_candidate']:.3f}"
        )
    curves = bon["curves"]
    if curves["candidates_unchecked"]:
        wrong = at["counted_wrong_unchecked"]
        shares = prm["counted_wrong_unchecked"]
        lines.append(
            f"  {sum(curves['candidates_unchecked'].values())} candidates whose answer was not checked count as wrong; share of "
            f"problems counted wrong only for one: selection by {', '.join(f'{h} {v:.3f}' for h, v in shares['selection'].items())}; "
            f"random {wrong['random']:.3f}, majority vote {wrong['majority']:.3f}, pass@N {wrong['pass']:.3f}"
        )
    return "\n".join(lines)

