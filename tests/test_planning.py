from labeler.labeling.planning import assign_row_keys, plan_hash, plan_units
from labeler.records import SourceRow


def row(i: int, problem: str = "p", steps=("a", "b"), answer: str = "1") -> SourceRow:
    return SourceRow(row_index=i, problem_id=f"id-{problem}", problem=problem, reference_answer=answer, steps=steps, source="test")


def test_identical_rows_get_distinct_keys_and_solution_ids():
    planned = assign_row_keys([row(0), row(1), row(2, problem="q")])
    keys = [p.row_key for p in planned]
    assert len(set(keys)) == 3
    ids = [p.given_solution().solution_id for p in planned]
    assert len(set(ids)) == 3


def test_keys_are_stable_across_runs_and_independent_of_row_index():
    first = assign_row_keys([row(0), row(1, problem="q")])
    again = assign_row_keys([row(5), row(9, problem="q")])
    assert [p.row_key for p in first] == [p.row_key for p in again]


def test_units_hold_shard_size_solutions_in_input_order():
    planned = assign_row_keys([row(i, problem=str(i)) for i in range(10)])
    units = plan_units(planned, shard_size=4)
    assert [len(u.rows) for u in units] == [4, 4, 2]
    assert [r.source.row_index for u in units for r in u.rows] == list(range(10))
    assert [u.index for u in units] == [0, 1, 2]
    assert units[1].shard_name == "part-00001.parquet"


def test_problem_only_rows_weigh_as_many_solutions_as_are_sampled():
    rows = [row(i, problem=str(i), steps=None) for i in range(5)]
    units = plan_units(assign_row_keys(rows), shard_size=8, solutions_per_problem=4)
    assert [len(u.rows) for u in units] == [2, 2, 1]
    # a row heavier than a unit still gets a unit of its own
    units = plan_units(assign_row_keys(rows), shard_size=2, solutions_per_problem=4)
    assert [len(u.rows) for u in units] == [1] * 5


def test_sampled_solution_ids_differ_per_sample_and_are_stable():
    planned = assign_row_keys([row(0, steps=None)])[0]
    a, b = planned.sampled_solution(0, ["x"], 5, False), planned.sampled_solution(1, ["x"], 5, False)
    assert a.solution_id != b.solution_id
    assert a.solution_id == assign_row_keys([row(0, steps=None)])[0].sampled_solution(0, ["y"], 5, True).solution_id


def test_plan_is_deterministic_and_changes_with_input():
    rows = [row(i, problem=str(i)) for i in range(7)]
    plan_a = plan_units(assign_row_keys(rows), shard_size=3)
    plan_b = plan_units(assign_row_keys(rows), shard_size=3)
    assert [u.unit_id for u in plan_a] == [u.unit_id for u in plan_b]
    assert plan_hash(plan_a) == plan_hash(plan_b)
    changed = plan_units(assign_row_keys(rows[:-1] + [row(6, problem="other")]), shard_size=3)
    assert plan_hash(changed) != plan_hash(plan_a)
    assert [u.unit_id for u in changed][:2] == [u.unit_id for u in plan_a][:2]
