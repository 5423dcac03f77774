"""The best-of-N scaling curve: accuracy against N (log scale), one row of panels per PRM.

Reads the results document that `labeler bon` writes (OUT/bon/results.json): left, selection by
the PRM with each aggregate; right, the PRM-weighted vote with each aggregate; both beside the
PRM-free lines (pass@N, the oracle; majority vote; a random candidate). Used by `labeler bon` for
its PNG and by `labeler report`.
"""

from __future__ import annotations

import io

# Where `labeler bon` and `labeler search` write their results in an output folder
BON_RESULTS, BON_CURVES = "bon/results.json", "bon/curves.png"
SEARCH_RESULTS, SEARCH_PROBLEMS, SEARCH_PLOT = "search/results.json", "search/problems.jsonl", "search/comparison.png"

AGGREGATE_COLOURS = {"min": "#4c72b0", "product": "#dd8452", "last": "#55a868", "mean": "#c44e52"}
BASELINES = (("pass", "pass@N (oracle)", "#222222", ":"), ("majority", "majority vote", "#8172b2", "--"), ("random", "random", "#999999", "-."))


def curves_png(results: dict, search: dict | None = None) -> bytes:
    """The PNG of a results document; `search` ({spec, accuracy, tokens_per_problem, label}, from
    labeler search) is marked on its PRM's selection panel at the N whose candidates cost as many tokens."""
    from matplotlib.figure import Figure

    prms = results["prms"] or [None]
    figure = Figure(figsize=(11, 3.6 * len(prms)), dpi=100, layout="constrained")
    axes = figure.subplots(len(prms), 2, squeeze=False)
    ns = results["n"]
    for row, prm in enumerate(prms):
        for column, (key, kind) in enumerate((("selection", "selection"), ("weighted_vote", "weighted vote"))):
            ax = axes[row][column]
            for name, label, colour, style in BASELINES:
                ax.plot(ns, results["baselines"][name], style, color=colour, label=label)
            if prm is not None:
                for aggregate, values in prm[key].items():
                    ax.plot(ns, values, "-o", markersize=3, color=AGGREGATE_COLOURS.get(aggregate), label=f"{kind}, {aggregate}")
                ax.set_title(f"{prm['name']}: PRM {kind}", fontsize=10)
                if column == 0 and search is not None and search["spec"] == prm["spec"] and results.get("tokens_per_candidate"):
                    at = search["tokens_per_problem"] / results["tokens_per_candidate"]
                    ax.plot([at], [search["accuracy"]], "*", markersize=12, color="black", label=f"{search['label']}, equal tokens")
            else:
                ax.set_title("no PRM: votes and baselines" if column == 0 else "", fontsize=10)
            ax.set_xscale("log", base=2)
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel("N (candidates per problem)")
            ax.set_ylabel("accuracy")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    figure.suptitle(f"Best-of-N on {results['problems']} problems", fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def search_point(search: dict) -> dict:
    """What the plot marks for a beam search (the results `labeler search` writes): its accuracy at its tokens, for its PRM."""
    settings = search["settings"]
    return {
        "spec": search["prm"]["spec"],
        "accuracy": search["accuracy"],
        "tokens_per_problem": search["tokens_per_problem"],
        "label": f"beam search B={settings['beams']} K={settings['proposals']} ({settings['aggregate']})",
    }
