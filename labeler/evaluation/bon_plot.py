"""The best-of-N scaling curve: accuracy against N (log scale), one row of panels per PRM.

Reads the results document that `labeler bon` writes (OUT/bon/results.json): left, selection by
the PRM with each aggregate; right, the PRM-weighted vote with each aggregate; both beside the
PRM-free lines (pass@N, the oracle; majority vote; a random candidate). Used by `labeler bon` for
its PNG and by `labeler report`.
"""

from __future__ import annotations

import io

AGGREGATE_COLOURS = {"min": "#4c72b0", "product": "#dd8452", "last": "#55a868", "mean": "#c44e52"}
BASELINES = (("pass", "pass@N (oracle)", "#222222", ":"), ("majority", "majority vote", "#8172b2", "--"), ("random", "random", "#999999", "-."))


def curves_png(results: dict) -> bytes:
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
            else:
                ax.set_title("no PRM: votes and baselines" if column == 0 else "", fontsize=10)
            ax.set_xscale("log", base=2)
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel("N (candidates per problem)")
            ax.set_ylabel("accuracy")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
    figure.suptitle(f"Best-of-N on {results['problems']} problems", fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
