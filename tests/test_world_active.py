"""bench/world_active.py's logic, with a runner that answers the labeler commands instead of running them."""

import json

import pytest

from bench.world import Commands
from bench.world_active import run_active, table, world_run


def world_folder(tmp_path, samples=20):
    world = tmp_path / "world"
    world.mkdir()
    rows = [{"id": f"p{i // 4}", "problem": f"Problem {i // 4}", "answer": "1", "steps": [f"step of {i}"], "label": -1} for i in range(samples)]
    (world / "policy.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return world, rows


RECORD = {"model": "/m", "temperature": 0.7, "seed": 0, "min_steps": None}


def answering(queued, tokens_per_row=10, rejected=0):
    """A runner that answers each command as the labeler would, once the labeler's own parser has read it (a flag
    the command no longer takes fails here, cheaply: the real run is tests/test_bench_world.py's, slow)."""
    from labeler.cli import build_parser

    seen = []

    def runner(args):
        seen.append(args)
        build_parser().parse_args(args)  # SystemExit (exit 2) on a command line the labeler CLI refuses
        if args[0] == "label":
            rows = [line for line in open(args[args.index("--input") + 1]) if line.strip()] if not args[2].endswith("queue.jsonl") else [None] * queued
            return json.dumps({"generated_tokens": tokens_per_row * len(rows), "solutions": len(rows) - rejected, "rejected_rows": rejected})
        if args[0] == "select":
            return json.dumps({"queued": queued, "ids_changed": 0})
        if args[0] == "eval":
            names = [a.split("=")[0] for a in args if "=" in a]
            return json.dumps({"sources": [{"name": n, "subsets": [{"f1": 0.5, "step_auc": 0.6}]} for n in names]})
        return ""

    return runner, seen


def test_the_arms_label_disjoint_shares_and_count_their_tokens(tmp_path):
    world, rows = world_folder(tmp_path)
    work = tmp_path / "active"
    work.mkdir()
    runner, seen = answering(queued=5)
    results = run_active(world, RECORD | {"min_steps": 2}, {"solutions": 20, "tokens": 1000}, work, 0.25, 3, Commands(runner))
    read = lambda name: [json.loads(line)["steps"][0] for line in (work / name).read_text().splitlines()]  # noqa: E731
    seed, random_share, pool = read("seed.jsonl"), read("random.jsonl"), read("pool.jsonl")
    assert len(seed) == len(random_share) == 5 and len(pool) == 15
    assert not set(seed) & set(pool) and set(random_share) <= set(pool)
    assert sorted(seed + pool) == sorted(row["steps"][0] for row in rows)
    select = next(args for args in seen if args[0] == "select")
    assert select[select.index("--input") + 1] == str(work / "pool.jsonl") and select[select.index("--budget") + 1] == "5"
    trains = [args for args in seen if args[0] == "train"]
    assert [args.count("--labels") for args in trains] == [1, 2, 2]
    assert all(args[args.index("--min-steps") + 1] == "2" for args in trains)  # as the world run trained its PRM on all
    summary = results["summary"]
    assert summary["active"]["tokens"] == summary["random"]["tokens"] == 100 and summary["all"]["tokens"] == 1000
    assert [summary[name]["solutions"] for name in ("seed", "active", "random", "all")] == [5, 10, 10, 20]
    assert "0.10" in table(summary)


def test_a_queue_short_of_the_share_stops_the_bench_before_labelling_it(tmp_path):
    world, _ = world_folder(tmp_path)
    work = tmp_path / "active"
    work.mkdir()
    runner, seen = answering(queued=3)
    with pytest.raises(SystemExit, match="the queue holds 3 of 5"):
        run_active(world, RECORD, {"solutions": 20, "tokens": 1000}, work, 0.25, 0, Commands(runner))
    assert not any(args[0] == "label" and "labels-queue" in " ".join(args) for args in seen)


def test_an_arm_with_a_rejected_row_stops_the_bench_rather_than_count_it_labelled(tmp_path):
    world, _ = world_folder(tmp_path)
    work = tmp_path / "active"
    work.mkdir()
    runner, _ = answering(queued=5, rejected=1)
    with pytest.raises(SystemExit, match="labelled 4 of 5 solutions"):
        run_active(world, RECORD, {"solutions": 20, "tokens": 1000}, work, 0.25, 0, Commands(runner))


def test_a_share_too_large_for_two_of_them_is_refused_before_any_command(tmp_path):
    world, _ = world_folder(tmp_path, samples=7)
    work = tmp_path / "active"
    work.mkdir()
    runner, seen = answering(queued=4)
    with pytest.raises(SystemExit, match="--share 0.5"):
        run_active(world, RECORD, {"solutions": 7, "tokens": 1000}, work, 0.5, 0, Commands(runner))
    assert not seen


def test_a_world_folder_that_is_not_one_finished_run_is_refused_saying_why(tmp_path):
    world, _ = world_folder(tmp_path)
    with pytest.raises(SystemExit, match="missing"):
        world_run(world)
    for name in ("policy-test.jsonl",):
        (world / name).write_text("")
    (world / "prm-posterior").mkdir()
    (world / "policy-posterior").mkdir()
    (world / "policy-posterior" / "manifest.json").write_text(json.dumps({"totals": {"solutions": 20, "generated_tokens": 1000}}))
    (world / "world.json").write_text("{not json")
    with pytest.raises(SystemExit, match="not a finished run"):
        world_run(world)
    summary = {"summary": {"labels": {"posterior-8": {"tokens": 1000}}}}
    (world / "world.json").write_text(json.dumps({"model": "/m", "temperature": 0.7, "seed": 0} | summary))
    with pytest.raises(SystemExit, match="records no min_steps"):
        world_run(world)
    (world / "world.json").write_text(json.dumps(RECORD | {"summary": {"labels": {"posterior-8": {"tokens": 999}}}}))
    with pytest.raises(SystemExit, match="not one finished run"):
        world_run(world)
    (world / "world.json").write_text(json.dumps(RECORD | summary))
    assert world_run(world)[1] == {"solutions": 20, "tokens": 1000}
