"""Active labeling in the world where the truth is known (ActPRM's question): a PRM trained on a share of the
policy's samples picks the next share to label by its own doubt; is the PRM trained on both as good as one
trained on everything, for fewer tokens, and better than one given a random share instead?

    make world-bench                                   # (or bench/world.py --work WORLD): the samples, the PRM on all
    flock /tmp/prm-engine.lock .venv/bin/python bench/world_active.py --world WORLD [--work ACTIVE]

From a finished bench/world.py run (WORLD: its --work) it takes the policy's samples (WORLD/policy.jsonl),
their held-out reference (WORLD/policy-test.jsonl) and the PRM trained on posterior labels of all of them
(WORLD/prm-posterior), with the run's completer, temperature and seed. The samples are shuffled (--seed);
the first --share of them is the seed set, and with the product's own commands:

    labeler label   --strategy posterior --rollouts 8   the seed set                      -> PRM "seed"
    labeler select  --queue uncertain --prm seed        the rest, --budget = a share      -> the queue
    labeler label   ... the queue; and the next share of the shuffle (the random arm)
    labeler train   on seed + queue -> PRM "active";    on seed + random share -> PRM "random"
    labeler eval    the four PRMs on the held-out samples

Every command runs with the product's defaults and the world bench's own flags (--model, --temperature,
--seed, --device cpu). It prints, per PRM, the solutions and the generated tokens of its labels, the
tokens as a share of labeling everything, and the PRM's F1 and step AUC on the held-out samples
(ProcessBench's protocol: the first error each PRM's scores put, against the exact one). ACTIVE/active.json
holds everything; its "summary" maps each PRM to {solutions, tokens, f1, auc}. One shuffle, one seed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.world import Commands, sampling_flags, train_flags, write_jsonl  # noqa: E402

LABELLING = ["--strategy", "posterior", "--rollouts", "8"]  # bench/world.py's posterior-8, which trained WORLD/prm-posterior
ALL_LABELS_NAME = "posterior-8"  # its name among the world run's summary labels (its output: WORLD/policy-posterior)


RECORD_KEYS = ("model", "temperature", "seed", "min_steps")  # the world run's flags its PRMs were trained with


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", required=True, help="a finished bench/world.py run's --work folder")
    parser.add_argument("--work", default=None, help="folder for the outputs (default: a new temp folder)")
    parser.add_argument("--share", type=float, default=0.25, help="the seed set's share of the samples, and the queue's (default 0.25)")
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed")
    args = parser.parse_args()
    world = Path(args.world).resolve()  # the commands run in the repository's root
    record, all_labels = world_run(world)
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="bench-world-active-"))
    if work.exists() and not work.is_dir():
        raise SystemExit(f"--work {work}: not a folder")
    work.mkdir(parents=True, exist_ok=True)
    if any(work.iterdir()):
        raise SystemExit(f"--work {work} holds an earlier run (its commands would resume, not run): pass a new or empty folder")
    results = run_active(world, record, all_labels, work, args.share, args.seed, Commands())
    (work / "active.json").write_text(json.dumps(results, indent=1))
    print(table(results["summary"]))
    print(f"\n(everything in {work / 'active.json'})")


def world_run(world: Path) -> tuple[dict, dict]:
    """The world run's record (world.json) and its labels of every sample ({solutions, tokens}), or SystemExit saying
    what is missing."""
    record_file, manifest = world / "world.json", world / "policy-posterior" / "manifest.json"
    needed = [world / "policy.jsonl", world / "policy-test.jsonl", world / "prm-posterior", record_file, manifest]
    missing = [str(path) for path in needed if not path.exists()]
    if missing:
        raise SystemExit(f"--world {world}: not a finished bench/world.py run (missing {', '.join(missing)})")
    try:
        record, totals = json.loads(record_file.read_text()), json.loads(manifest.read_text())["totals"]
    except (json.JSONDecodeError, KeyError) as error:
        raise SystemExit(f"--world {world}: {record_file} or {manifest} is not a finished run's ({error})") from None
    absent = [key for key in RECORD_KEYS if key not in record]
    if absent:
        raise SystemExit(f"{record_file} records no {', '.join(absent)} (a run from before 2026-12-07): rerun bench/world.py")
    if (record.get("summary") or {}).get("labels", {}).get(ALL_LABELS_NAME, {}).get("tokens") != totals.get("generated_tokens"):
        raise SystemExit(f"{record_file}: its summary's {ALL_LABELS_NAME} tokens are not {manifest}'s: not one finished run")
    return record, {"solutions": totals.get("solutions"), "tokens": totals["generated_tokens"]}


def run_active(world: Path, record: dict, all_labels: dict, work: Path, share: float, seed: int, commands: Commands) -> dict:
    rows = [json.loads(line) for line in (world / "policy.jsonl").read_text().splitlines() if line.strip()]
    size = round(len(rows) * share)
    if not 1 <= size or 2 * size > len(rows):
        raise SystemExit(f"--share {share}: a share of the {len(rows)} samples is {size}; the seed set and another share need 1 to {len(rows) // 2}")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    pick = lambda indices: [rows[i] for i in indices]  # noqa: E731
    seed_file = write_jsonl(work / "seed.jsonl", pick(order[:size]))
    random_file = write_jsonl(work / "random.jsonl", pick(order[size : 2 * size]))
    pool_file = write_jsonl(work / "pool.jsonl", pick(order[size:]))
    common = sampling_flags(record["model"], record["temperature"], record["seed"])  # as bench/world.py labels and trains
    train = train_flags(record["model"], record["seed"], record["min_steps"])

    def label(name: str, input_file: Path, expected: int) -> int:
        """Label `input_file`, every one of its `expected` solutions (else SystemExit: the arms would not be alike); its tokens."""
        summary = json.loads(commands(f"label {name}", ["label", "--input", str(input_file), "--preset", "processbench",
                                                        "--output", str(work / f"labels-{name}"), *LABELLING, *common, "--json"]))  # fmt: skip
        if summary["solutions"] != expected or summary["rejected_rows"]:
            raise SystemExit(f"labelling {name} labelled {summary['solutions']} of {expected} solutions ({summary['rejected_rows']} rejected): "
                             f"the arms would not be alike; see {work / f'labels-{name}'}")  # fmt: skip
        return summary["generated_tokens"]

    tokens = {"seed": label("seed", seed_file, size)}
    commands("train PRM on the seed set", ["train", "--labels", str(work / "labels-seed"), "--output", str(work / "prm-seed"), *train])
    queue = json.loads(commands("queue the seed PRM's most uncertain", ["select", "--queue", "uncertain", "--prm", str(work / "prm-seed"),
                                                                        "--input", str(pool_file), "--preset", "processbench",
                                                                        "--budget", str(size), "--output", str(work / "queue.jsonl"),
                                                                        "--device", "cpu", "--json", "--quiet"]))  # fmt: skip
    if queue["queued"] < size or queue["ids_changed"]:  # the arms would not be alike: say so rather than compare them
        raise SystemExit(f"the queue holds {queue['queued']} of {size} solutions, {queue['ids_changed']} under another solution_id: {work / 'queue.jsonl'}")
    tokens["queue"] = label("queue", work / "queue.jsonl", size)
    tokens["random"] = label("random", random_file, size)
    for arm in ("queue", "random"):
        commands(f"train PRM on seed + {arm}", ["train", "--labels", str(work / "labels-seed"), "--labels", str(work / f"labels-{arm}"),
                                                "--output", str(work / f"prm-{arm}"), *train])  # fmt: skip
    scored = ["--prm", f"seed={work / 'prm-seed'}", "--prm", f"active={work / 'prm-queue'}", "--prm", f"random={work / 'prm-random'}",
              "--prm", f"all={world / 'prm-posterior'}"]  # fmt: skip
    quality = json.loads(commands("eval the PRMs on held-out samples", ["eval", *scored, "--reference", str(world / "policy-test.jsonl"),
                                                                        "--device", "cpu", "--json"]))  # fmt: skip
    by_name = {source["name"]: (source.get("subsets") or [{}])[0] for source in quality["sources"]}
    labelled = {"seed": size, "active": 2 * size, "random": 2 * size, "all": all_labels["solutions"]}
    spent = {"seed": tokens["seed"], "active": tokens["seed"] + tokens["queue"], "random": tokens["seed"] + tokens["random"],
             "all": all_labels["tokens"]}  # fmt: skip
    summary = {
        name: {"solutions": labelled[name], "tokens": spent[name], "f1": by_name.get(name, {}).get("f1"), "auc": by_name.get(name, {}).get("step_auc")}
        for name in ("seed", "active", "random", "all")
    }  # fmt: skip
    return {"world": str(world), "share": share, "seed": seed, "samples": len(rows), "queue": queue, "tokens": tokens,
            "eval": quality, "timings": commands.timings, "summary": summary}  # fmt: skip


def table(summary: dict) -> str:
    everything = summary["all"]["tokens"]
    percent = lambda value: "n/a" if value is None else f"{value:.1%}"  # noqa: E731
    lines = [f"{'PRM trained on':<32}{'solutions':>10}{'tokens':>12}{'x all':>8}{'F1':>9}{'step AUC':>10}"]
    captions = {"seed": "the seed share", "active": "seed + the seed PRM's queue", "random": "seed + a random share", "all": "every sample"}
    for name, row in summary.items():
        auc = "n/a" if row["auc"] is None else f"{row['auc']:.3f}"
        lines.append(f"{captions[name]:<32}{row['solutions']:>10}{row['tokens']:>12,}{row['tokens'] / everything:>8.2f}{percent(row['f1']):>9}{auc:>10}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
