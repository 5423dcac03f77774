"""`labeler status DIR`: what a job (running or finished) has done, read from its manifest and commit records alone."""

from __future__ import annotations

import time
from calendar import timegm

from labeler.store.lock import read_lock_holder
from labeler.store.location import OutputLocation
from labeler.store.manifest import JOB_KIND_KEY, load_manifest
from labeler.store.progress import format_duration
from labeler.store.shard_store import FAILURE_KEY, REOPENED_KEY, TRANSIENT_KEY


def job_status(directory: str) -> dict:
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
    return {
        "directory": directory,
        "job": manifest.get(JOB_KIND_KEY) or "label",  # the command that wrote it: label, judge, consensus
        "state": "finished" if done == total else "incomplete",
        "units_committed": done,
        "units_total": total,
        "units_failed": len(failed),  # committed with rows of them in rejected/ (labeler/labeling/unit_failures.py)
        "units_failed_by_the_machine": sum(1 for stats in failed if stats.get(TRANSIENT_KEY)),  # every rerun redoes them
        # the most reruns that reopened one of those and failed it again (0: none was failed twice)
        "most_reopenings": max((stats.get(REOPENED_KEY, 0) for stats in failed if stats.get(TRANSIENT_KEY)), default=0),
        "input_rows_committed": committed_rows,
        "input_rows_planned": all_rows,
        "input_rows_rejected": manifest["input"].get("rows_rejected", 0),
        # rows and sampled solutions of committed units that went to rejected/ while labelling (not labelled)
        "rejected_in_units": totals.get("rejected_in_units", 0),
        "solutions": totals["solutions"],
        "steps": totals["steps"],
        "rollouts": totals["rollouts"],
        "generated_tokens": totals["generated_tokens"],
        "generation_seconds": seconds,
        "tokens_per_second": totals["generated_tokens"] / seconds if seconds else None,
        "rollouts_per_second": totals["rollouts"] / seconds if seconds else None,
        "eta_seconds": (all_rows - committed_rows) / rows_per_second if rows_per_second else None,
        "last_commit": last_commit or None,
        "seconds_since_last_commit": time.time() - timegm(time.strptime(last_commit, "%Y-%m-%dT%H:%M:%SZ")) if last_commit else None,
        "model": manifest["model"].get("name"),
        "config_hash": manifest["config_hash"],
        "driver": read_lock_holder(location),
    }


def format_status(status: dict) -> str:
    def rate(value: float | None, unit: str) -> str:
        return "n/a" if value is None else f"{value:.1f} {unit}"

    failed = _describe_failed(
        status["units_failed"], status["units_failed_by_the_machine"], status.get("most_reopenings", 0), status["job"]
    )
    eta = "done" if status["state"] == "finished" else ("?" if status["eta_seconds"] is None else format_duration(status["eta_seconds"]))
    return "\n".join(
        [
            f"job       : {status['directory']} ({status['state']}{'' if status['job'] == 'label' else ', labeler ' + status['job']})",
            f"units     : {status['units_committed']}/{status['units_total']} committed{failed}",
            f"rows      : {status['input_rows_committed']}/{status['input_rows_planned']} input rows labelled or rejected "
            f"({status['rejected_in_units']} rows or solutions rejected while labelling (in rejected/), "
            f"{status['input_rows_rejected']} rejected on input)",
            f"solutions : {status['solutions']} ({status['steps']} steps, {status['rollouts']} {_samples(status)})",
            f"tokens    : {status['generated_tokens']} generated",
            f"rate      : {rate(status['tokens_per_second'], 'tokens/s')}, {rate(status['rollouts_per_second'], 'rollouts/s')}",
            f"ETA       : {eta}",
            f"model     : {status['model']}",
            f"driver    : {_describe_driver(status['driver'])}",
        ]
    )


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


def _samples(status: dict) -> str:
    """What the job's samples are: a judge's are its critiques (its manifest counts them as rollouts)."""
    return "critiques" if status.get("job") == "judge" else "rollouts"


def _describe_driver(driver: dict | None) -> str:
    if driver is None:
        return "none (the output is not locked: no job is running on it)"
    if driver.get("unreadable"):
        return "a lock that cannot be read: the next run takes it over"
    if driver.get("foreign"):
        return f"a lock {driver['foreign']}: its driver may be running; the next run refuses it until it is deleted"
    who = f"host {driver['host']}, pid {driver['pid']}, since {driver['started']}, last heartbeat {driver['heartbeat_age_seconds']:.0f}s ago"
    return f"stale lock of {who}: its driver is gone, the next run takes it over" if driver["stale"] else f"running on {who}"
