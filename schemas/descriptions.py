"""What each column of the labeling job's tables means, as the Parquet files carry it: schemas/tables.py attaches each
text to its field as the field metadata b"description", so that a reader of a shard (pyarrow, datasets, a notebook)
finds it in `schema.field(name).metadata[b"description"]` without the docs. Which label methods have a soft label and
counts is said on soft_labels, n_correct and n_rollouts; tests/test_label_counts.py checks every column has one."""

from __future__ import annotations

DESCRIPTION_KEY = b"description"
NOT_OWN = "inferred, retraced, human and judge steps have no rollouts of their own"

COLUMN_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "labels": {
        "problem_id": (
            "The problem's id (the input's id column, else derived from the problem text); a problem's solutions share "
            "it."
        ),
        "solution_id": "This solution's id: unique in the table, the same on every rerun.",
        "problem": "The problem text, as the completer was prompted with it.",
        "reference_answer": "The reference final answer that each rollout's final answer is checked against.",
        "steps": "The solution's steps in order; every per-step list column holds one item per step.",
        "soft_labels": (
            "Per step: n_correct / n_rollouts, the Monte-Carlo estimate that the prefix ending at this step still reaches"
            " the answer. Only label_method rollouts (N rollouts of its own prefix) and final_answer (the step's stated "
            "answer checked: 0 or 1) have one; null for early_stop, inferred, retraced, unlabelled, human and judge "
            "steps."
        ),
        "hard_labels": (
            "Per step: true (right), false (wrong) or null (unlabelled). How it was made is label_method: measured at N "
            "rollouts only for rollouts; one check for final_answer; early_stop stopped before N; inferred (deduced from "
            "other steps by the search, e.g. every step after the first error negative) and retraced (from a rollout of "
            "an earlier prefix that wrote this step) were not sampled from this prefix: never read them as an estimate at"
            " N."
        ),
        "n_correct": (
            f"Per step: counted rollouts whose final answer matched the reference. Counts are kept for rollouts, "
            f"final_answer (one check), early_stop (fewer than N) and unlabelled steps (what was counted, none correct); 0"
            f" where there are none: {NOT_OWN}."
        ),
        "n_rollouts": (
            f"Per step: rollouts counted in the label (soft = n_correct / n_rollouts): N for rollouts less the cut "
            f"(n_truncated, under --truncated excluded) and timed-out ones, fewer for early_stop, 1 for final_answer, 0 "
            f"where none were counted: {NOT_OWN}."
        ),
        "n_truncated": (
            "Per step: rollouts cut by their token budget, or still thinking at it; not among n_rollouts under "
            "--truncated excluded."
        ),
        "n_timeouts": (
            "Per step: rollouts (or a final-step check) whose answer check timed out: never among n_rollouts, never in "
            "the label."
        ),
        "label_method": (
            "Per step, how its label was made: rollouts (N rollouts of its prefix: soft and hard measured), final_answer "
            "(its stated answer checked, one rollout), early_stop (sampled, stopped before N: hard only, counts kept), "
            "inferred (not sampled: hard deduced from other steps, no counts), retraced (hard only, from a rollout of an "
            "earlier prefix that wrote the step word for word), unlabelled (no label, see unlabelled_reason), human (a "
            "dataset's or a reviewer's hard label), judge (from an LLM judge's first error)."
        ),
        "unlabelled_reason": "Per step: why an unlabelled step has no label; null on every other step.",
        "first_error": (
            "Index (from 0) of the first hard-negative step when every step before it is labelled; -1 when every step is "
            "labelled and none is negative; null when an unlabelled step comes first (it may be the true first error), "
            "even where the final answer checks right. Labels of every method count here, inferred and early_stop ones "
            "too."
        ),
        "thinking_steps": "A reasoning trace: steps[:thinking_steps] are its thinking, the rest its response; 0 for a plain solution.",
        "trajectory_verdict": (
            "The checker's verdict on the final answer the whole solution states: correct, incorrect, unparseable, "
            "timeout, unfinished or unchecked."
        ),
        "trajectory_label": "trajectory_verdict == correct; null where not known (timeout, unchecked).",
        "generated_tokens": "Tokens generated for this solution: its rollouts, plus solution_tokens when the job sampled the solution.",
        "solution_tokens": "Tokens of the solution itself when the job sampled it (problem-only rows); 0 for a given solution.",
        "solution_truncated": "The job sampled this solution and its token budget cut it.",
        "row_index": "The input row (from 0) this solution comes from.",
        "unit_id": "The work unit that labelled it (the manifest's units).",
        "source": "The input preset the row was read with (e.g. gsm8k, processbench).",
        "model": "The completer model that sampled the rollouts.",
        "strategy": (
            "The labeling strategy (exhaustive, first-error, posterior, adaptive, final-answer; or the importer's, the "
            "judge's)."
        ),
        "seed": "The job's base seed; each prefix's rollouts derive their seeds from it and the prefix text.",
        "config_hash": "The hash of the job's settings that change labels.",
        "schema_version": "The labels schema version the row was written under.",
        "label_source": "Who made the solution's labels: monte-carlo, judge, consensus or human.",
    },
    "rollouts": {
        "problem_id": "The problem's id, as in the labels table.",
        "solution_id": "The solution whose prefix this rollout continues (or whose last step was checked), as in the labels table.",
        "step_index": (
            "The prefix's last step (from 0): the rollout continues steps[0..step_index]; its verdict counts toward that "
            "step's label."
        ),
        "rollout_index": "Which of the prefix's rollouts (from 0); its seed is the prefix's seed plus this index.",
        "seed": "The sampling seed of this rollout.",
        "text": "The completion's text (for a final-answer check, the step checked).",
        "extracted_answer": "The final answer the checker read from text; null where it found none.",
        "verdict": (
            "correct, incorrect, unparseable, timeout (the check timed out: not counted) or truncated (cut by its token "
            "budget)."
        ),
        "tokens": "Tokens generated for this completion (0 for a final-answer check).",
        "finish_reason": "Why generation stopped: stop, length (its token budget), or the engine's other reasons.",
        "token_budget": "Tokens the completion was allowed; null for a final-answer check.",
    },
    "rejected": {
        "row_index": "The input row (from 0) that was refused, or whose solution was.",
        "problem_id": "The problem's id where it could be read; null otherwise.",
        "stage": "Where it was refused: input (as rows were read), generation (while labelling) or import.",
        "field": "The field at fault (e.g. steps, answer, unit).",
        "reason": "Why it was refused.",
        "raw": "The row (or solution) as it was read, as JSON text, cut to a length: enough to find and fix it.",
    },
}
