"""`labeler status DIR`: what a job (running, interrupted or finished) has done, read from its manifest,
commit records and lock alone.

Its state: finished (every unit committed), running (units left, and a live driver holds the output's
lock) or interrupted (units left, and no driver: no lock, or a stale one, left by a driver that is
gone). Only a running job has an ETA; an interrupted one has instead the command that resumes it.
A job run with --no-output-lock holds no lock, so while it runs it reads as interrupted."""

from __future__ import annotations

import time
from calendar import timegm
from typing import Callable

from labeler.store.lock import read_lock_holder
from labeler.store.location import OutputLocation
from labeler.store.manifest import (
    LABEL_COUNTS_KEY,
    UNDETERMINED_KEY,
    ConfigMismatchError,
    check_same_schema,
    generated_nothing,
    job_kind,
    load_manifest,
)
from labeler.store.progress import format_duration
from labeler.store.shard_store import FAILURE_KEY, REOPENED_KEY, TRANSIENT_KEY

FINISHED, RUNNING, INTERRUPTED = "finished", "running", "interrupted"  # the job's `state`
CUT_SHARE_WARNING = 0.2  # a job with more of its rollouts cut by their token budget says so
UNDETERMINED_SHARE_WARNING = 0.5  # a job with more of its solutions' first errors undetermined says so
# the strategy that labels only each solution's last step: its first errors are mostly undetermined (the name
# labeler/labeling/config.py declares, which this layer, below labeling, cannot import)
FINAL_ANSWER = "final-answer"
# the jobs that generate (an import or a consensus writes what it reads), where no engine record says otherwise
GENERATING_KINDS = ("label", "judge")


def job_status(directory: str, resume_command: Callable[[str, dict, str], str | None] | None = None) -> dict:
    """The job in `directory`, as `labeler status --json` shows it. `resume_command(kind, settings, directory)`:
    the command that resumes an interrupted job of that kind with those settings (the manifest's), or None
    where it cannot say; `labeler status` gives it (labeler/cli/status.py), since the flags are the CLI's."""
    location = OutputLocation(directory)
    manifest = load_manifest(location)
    if manifest is None:
        raise FileNotFoundError(f"{directory}: no manifest.json, not a labeler output directory")
    totals = manifest["totals"]
    seconds = totals["generation_seconds"]
    done, total = totals["units_committed"], totals["units"]
    committed_rows = sum(unit["n_rows"] for unit in manifest["units"] if unit["state"] == "committed")
    all_rows = sum(unit["n_rows"] for unit in manifest["units"])
    rows_per_second = committed_rows / seconds if seconds else None
    failed = [unit.get("stats", {}) for unit in manifest["units"] if unit.get("stats", {}).get(FAILURE_KEY)]
    last_commit = max((unit.get("committed_at", "") for unit in manifest["units"]), default="")
    driver = read_lock_holder(location)
    kind = job_kind(manifest) or "label"  # the command that wrote it: label, judge, consensus, import
    nothing = generated_nothing(manifest)  # its engine records say, where it has any; else its kind does
    generates = kind in GENERATING_KINDS if nothing is None else not nothing
    if done == total:
        state = FINISHED
    else:  # a foreign lock (a newer labeler's) is not stale: its driver may be running
        state = RUNNING if driver is not None and not driver.get("stale") else INTERRUPTED
    refused = _resume_refusal(manifest, directory, kind) if state == INTERRUPTED else None
    if state == INTERRUPTED:
        eta, eta_reason = None, "interrupted: no driver is running; rerun the job's command to resume"
    elif state == RUNNING and not rows_per_second:
        eta, eta_reason = None, "no unit committed yet: no rate to estimate from"
    else:
        eta, eta_reason = (all_rows - committed_rows) / rows_per_second if rows_per_second else 0.0, None
    return {
        "directory": directory,
        "job": kind,
        "generates": generates,  # False: it loads no model (an import, a consensus, final-answer on given solutions)
        "state": state,
        "units_committed": done,
        "units_total": total,
        "units_failed": len(failed),  # committed with rows of them in rejected/ (labeler/labeling/unit_failures.py)
        "units_failed_by_the_machine": sum(1 for stats in failed if stats.get(TRANSIENT_KEY)),  # every rerun redoes them
        # the most reruns that reopened one of those and failed it again (0: none was failed twice)
        "most_reopenings": max((stats.get(REOPENED_KEY, 0) for stats in failed if stats.get(TRANSIENT_KEY)), default=0),
        "input_rows_committed": committed_rows,
        "input_rows_planned": all_rows,
        "input_rows_rejected": manifest["input"].get("rows_rejected", 0),  # read but refused as they were read, never planned
        "input_rows_read": all_rows + manifest["input"].get("rows_rejected", 0),
        # rows and sampled solutions of committed units that went to rejected/ while labelling (not labelled)
        "rejected_in_units": totals.get("rejected_in_units", 0),
        "solutions": totals["solutions"],
        "steps": totals["steps"],
        "rollouts": totals["rollouts"],
        "truncated_rollouts": totals.get("truncated_rollouts", 0),  # of `rollouts`, cut by their token budget
        # solutions whose first error their labels leave undetermined (null first_error); None: not counted (older units)
        "undetermined_first_errors": totals.get(UNDETERMINED_KEY),
        # the labels' steps by label_method (measured, inferred, early-stopped... apart) and the solutions whose labels
        # look odd but follow the rules (labeler/store/manifest.py: label_counts); None: not recorded (older units)
        "label_counts": totals.get(LABEL_COUNTS_KEY),
        "warnings": count_warnings(totals.get("truncated_rollouts", 0), totals["rollouts"], totals.get(UNDETERMINED_KEY),
                                   totals["solutions"], manifest.get("config") or {}),  # fmt: skip
        "generated_tokens": totals["generated_tokens"],
        "generation_seconds": seconds,
        # None when nothing is measured: no time yet, or a job that generates nothing
        "tokens_per_second": totals["generated_tokens"] / seconds if seconds and generates else None,
        "rollouts_per_second": totals["rollouts"] / seconds if seconds and generates else None,
        "eta_seconds": eta,  # running jobs only (0 for a finished one); None with eta_reason saying why
        "eta_reason": eta_reason,
        "last_commit": last_commit or None,
        "seconds_since_last_commit": time.time() - timegm(time.strptime(last_commit, "%Y-%m-%dT%H:%M:%SZ")) if last_commit else None,
        "model": manifest["model"].get("name"),
        "config_hash": manifest["config_hash"],
        "driver": driver,
        # interrupted jobs only: the command that resumes it, rebuilt from the manifest's settings (None where
        # they cannot be rebuilt: then rerun the command that started it)
        "resume_command": resume_command(kind, manifest.get("config") or {}, directory)
        if state == INTERRUPTED and resume_command is not None and refused is None
        else None,
        "resume_refused": refused,  # interrupted jobs that a resume would refuse (labels of another schema): why
    }


def _resume_refusal(manifest: dict, directory: str, kind: str) -> str | None:
    """Why a resume of this job would be refused before it starts (its labels' schema: check_same_schema), or None."""
    try:
        check_same_schema(dict(manifest), directory, kind)  # a copy: it marks a resumable manifest as the new schema's
    except ConfigMismatchError as error:
        return str(error)
    return None


def format_status(status: dict) -> str:
    def rate(value: float | None, unit: str) -> str:
        return "n/a" if value is None else f"{value:.1f} {unit}"

    failed = _describe_failed(
        status["units_failed"], status["units_failed_by_the_machine"], status.get("most_reopenings", 0), status["job"]
    )
    state, kind = status["state"], status["job"]
    rates = f"{rate(status['tokens_per_second'], 'tokens/s')}, {rate(status['rollouts_per_second'], 'rollouts/s')}"
    generates = status.get("generates", kind in GENERATING_KINDS)
    if not generates:
        rates = "none: nothing is generated"
    if state == FINISHED:
        what, eta = "finished", "done"
    elif state == RUNNING:
        what, eta = "running", "?" if status["eta_seconds"] is None else format_duration(status["eta_seconds"])
    else:  # no driver: nothing runs, so no rate now and no ETA; only what it did while it ran, if anything
        unlocked = status["driver"] is None  # a job run with --no-output-lock holds no lock while it runs
        what = "interrupted: no driver holds its lock" + (" (unless it runs with --no-output-lock)" if unlocked else "")
        eta = "none: the job is interrupted"
        if generates:
            rates = "none now (no driver is running)" + (f"; {rates} while it ran" if status["tokens_per_second"] is not None else "")
    lines = [
        f"job       : {status['directory']} ({what}{'' if kind == 'label' else ', labeler ' + kind})",
        f"units     : {status['units_committed']}/{status['units_total']} committed{failed}",
        f"rows      : {status['input_rows_committed'] + status['input_rows_rejected']}/{status['input_rows_read']} input rows "
        f"labelled or rejected ({status['rejected_in_units']} rows or solutions rejected while labelling (in rejected/), "
        f"{status['input_rows_rejected']} rejected on input)",
        f"solutions : {status['solutions']} ({status['steps']} steps, {status['rollouts']} {_samples(status)}{_cut(status)})"
        f"{_undetermined(status)}",
        *_label_lines(status),
        f"tokens    : {status['generated_tokens']} generated",
        f"rate      : {rates}",
        f"ETA       : {eta}",
        f"model     : {status['model']}",
        f"driver    : {_describe_driver(status['driver'])}",
    ]
    lines += [f"warning   : {warning}" for warning in status.get("warnings", [])]
    if state == INTERRUPTED and status.get("resume_refused"):
        lines.append(f"resume    : refused: {status['resume_refused']}")
    elif state == INTERRUPTED:
        resume = status.get("resume_command")
        lines.append(
            f"resume    : {resume}  (plus the flags it ran with that the manifest does not keep: engine and cluster flags, "
            "--checker-timeout, --max-rejected-share, --no-output-lock, if any)"
            if resume
            else "resume    : rerun the command that started it (the same settings and --output; `labeler bon` or `search` for their candidates)"
        )
        if status["driver"] is None:
            lines.append("            only when no job runs on it: a job run with --no-output-lock holds no lock while it runs")
    return "\n".join(lines)


def _describe_failed(failed: int, by_machine: int, reopenings: int = 0, job: str = "label") -> str:
    if not failed:
        return ""
    parts = []
    if failed > by_machine:
        # labeler import has no --retry-rejected: its rows fail the same way each time, until the input is fixed
        again = "fix those rows and import them into a new output" if job == "import" else "--retry-rejected labels them again"
        parts.append(f"{failed - by_machine} failed: rows of them are in rejected/, {again}")
    if by_machine:
        parts.append(f"{by_machine} failed by the machine (an unhealthy answer checker): their rows are in rejected/, "
                     "a rerun labels them again")
        if reopenings:
            parts[-1] += f", though one was reopened {reopenings} times and failed again each time: is the checker sick?"
    return f" ({'; '.join(parts)})"


def count_warnings(truncated: int, rollouts: int, undetermined: int | None, solutions: int, config: dict) -> list[str]:
    """What a job's counts need said, for its summary and `labeler status`: a large share of rollouts cut by
    their token budget (CUT_SHARE_WARNING), and most solutions' first errors undetermined (but under final-answer,
    which labels only the last step by design). `config`: the job's settings, as its manifest holds them."""
    warnings = []
    if rollouts and truncated / rollouts > CUT_SHARE_WARNING:
        budget = config.get("max_new_tokens")
        policy = config.get("truncated", "excluded")
        effect = "counted wrong (--truncated incorrect)" if policy == "incorrect" else "left out of the labels (--truncated excluded)"
        warnings.append(
            f"{truncated} of {rollouts} rollouts ({truncated / rollouts:.0%}) were cut by their token budget"
            f"{f' (--max-new-tokens {budget})' if budget else ''} and {effect}: raise --max-new-tokens"
        )
    outcome_only = config.get("strategy") == FINAL_ANSWER  # it labels only the last step: not a problem to warn of
    if undetermined and solutions and undetermined / solutions > UNDETERMINED_SHARE_WARNING and not outcome_only:
        warnings.append(
            f"{undetermined} of {solutions} solutions have an undetermined first error (an unlabelled step before any "
            "labelled wrong one: null first_error); see unlabelled_reason in the labels"
        )
    return warnings


# How each label_method reads in a summary, in this order (any other method: by its name, after them)
METHOD_WORDS = {
    "rollouts": "measured by rollouts",
    "final_answer": "final answer checked",
    "early_stop": "early-stopped (sampled, stopped before N: hard label only)",
    "retraced": "retraced (hard label from a rollout of an earlier prefix that wrote the step)",
    "inferred": "inferred (not sampled: deduced from other steps",
    "unlabelled": "unlabelled",
    "human": "human",
    "judge": "judge",
}


def describe_label_counts(counts: dict | None) -> tuple[str, list[str]]:
    """What `label_counts` (labeler/store/manifest.py) says, for the `label` summary and `labeler status`: the steps by
    label method, each apart (only the methods the labels have; an inferred step's negatives counted too, so that
    inferred negatives never pass for measured ones), and a note per kind of solution whose labels look odd but follow
    the rules. None: 'not recorded' (a unit written before the count), never 0."""
    if counts is None:
        return "not recorded (units written by an older prm-labeler)", []
    methods, negative = counts.get("methods", {}), counts.get("negative", {})
    parts = []
    for method in [*METHOD_WORDS, *sorted(set(methods) - set(METHOD_WORDS))]:
        if not methods.get(method):
            continue
        words = METHOD_WORDS.get(method, method)
        if method == "inferred":
            words += f"; {negative.get(method, 0)} negative)"
        elif method not in ("rollouts", "final_answer", "unlabelled") and negative.get(method):
            words += f" ({negative[method]} negative)"
        parts.append(f"{methods[method]} {words}")
    notes = []
    undetermined = counts.get("final_right_first_error_undetermined", 0)
    if undetermined:
        notes.append(
            f"{_solutions(undetermined)} a final answer checked right and an undetermined first error: an unlabelled step "
            "comes before any step labelled wrong, and a right answer does not rule out an earlier error (null first_error)"
        )
    after = counts.get("final_right_after_a_negative_step", 0)
    if after:
        notes.append(
            f"{_solutions(after)} a final answer checked right after a step labelled wrong: an answer reached in spite of "
            "an error; the steps after a first error are negative by --after-first-error (inferred where not sampled)"
        )
    return ", ".join(parts) or "no steps", notes


def _solutions(n: int) -> str:
    return f"{n} solution has" if n == 1 else f"{n} solutions have"


def _label_lines(status: dict) -> list[str]:
    if status.get("job") not in ("label", "import", "consensus") or not status["solutions"]:
        return []
    methods, notes = describe_label_counts(status.get("label_counts"))
    return [f"labels    : steps by label method: {methods}", *(f"note      : {note}" for note in notes)]


def _cut(status: dict) -> str:
    return f", {status['truncated_rollouts']} cut by their token budget" if status.get("truncated_rollouts") else ""


def _undetermined(status: dict) -> str:
    undetermined = status.get("undetermined_first_errors")
    if status.get("job") not in ("label", "import") or not status["solutions"]:
        return ""
    if undetermined is None:
        return "; first errors undetermined: not counted (units written by an older prm-labeler)"
    return f"; {undetermined} with an undetermined first error"


def _samples(status: dict) -> str:
    """What the job's samples are: a judge's are its critiques (its manifest counts them as rollouts)."""
    return "critiques" if status.get("job") == "judge" else "rollouts"


def _describe_driver(driver: dict | None) -> str:
    if driver is None:
        return "none (the output is not locked: no job is running on it, unless one runs with --no-output-lock)"
    if driver.get("unreadable"):
        return "a lock that cannot be read: the next run takes it over"
    if driver.get("foreign"):
        return f"a lock {driver['foreign']}: its driver may be running; the next run refuses it until it is deleted"
    who = f"host {driver['host']}, pid {driver['pid']}, since {driver['started']}, last heartbeat {driver['heartbeat_age_seconds']:.0f}s ago"
    if driver.get("gone"):
        return f"stale lock of {who}: its driver is gone ({driver['gone']}), the next run takes it over"
    return f"stale lock of {who}: its driver is gone, the next run takes it over" if driver["stale"] else f"running on {who}"
