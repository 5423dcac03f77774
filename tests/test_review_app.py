"""`labeler view` over real HTTP on 127.0.0.1 (in this process; the first test as a subprocess, as a user runs it), on a real labeling output
(the shared tiny engine's) and on labels and judgments shards written with the tables' schemas."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeler.cli import main
from labeler.store.corrections import read_corrections
from labeler.store.reader import LabelsError, read_labelled_rows
from tests.review_support import ViewServer
from tests.synthetic_labels import labels_row, write_labels
from tests.test_consensus import judgment, write_judgments

STEPS = ["1 + 1 = 2.", "2 + 2 = 4.", "4 + 4 = 8.", "The answer is 8."]


def rows() -> list[dict]:
    made = [
        labels_row("p0", "s0", "Double one three times.", STEPS, [1.0, 0.75, 0.5, 1.0], [True, True, True, True]),
        labels_row("p1", "s1", "Double one twice, wrongly.", STEPS, [1.0, 0.0, 0.0, 0.0], [True, False, False, False]),
        labels_row("p2", "s2", "A step with no label.", STEPS, [1.0, None, 0.0, 0.0], [True, None, False, False]),
        labels_row("p3", "s3", "Cut rollouts.", STEPS, [1.0, 1.0, 1.0, 1.0], [True, True, True, True], n_truncated=[0, 2, 0, 0]),
    ]
    return made


@pytest.fixture
def shards(tmp_path) -> Path:
    return write_labels(tmp_path / "labels-folder", rows(), shard_size=2)


def solution_ids(html: str) -> list[str]:
    return re.findall(r'href="/solution/\d+/([^"]+)"', html)


def test_filters_join_the_judge_and_the_prm_and_say_what_is_not_known(shards, tmp_path):
    human = labels_row("p1", "s1", "Double one twice, wrongly.", STEPS, [None] * 4, [True, True, False, None], label_source="human")
    human["label_method"] = ["human", "human", "human", "unlabelled"]
    human["n_rollouts"] = human["n_correct"] = [0] * 4
    imported = write_labels(tmp_path / "imported", [human])
    judged = write_judgments(
        tmp_path / "judged", [judgment("s0", [-1, -1], steps=STEPS), judgment("s1", [2, 2], steps=STEPS), judgment("s2", [2, 2], steps=STEPS)]
    )
    scores = tmp_path / "scores.jsonl"
    scores.write_text(
        "".join(
            json.dumps({"problem_id": p, "solution_id": s, "step_scores": sc}) + "\n"
            for p, s, sc in (("p0", "s0", [0.9, 0.8, 0.7, 0.9]), ("p1", "s1", [0.9, 0.2, 0.1, 0.1]), ("p2", "s2", [0.9, None, None, None]))
        )
    )
    with ViewServer(shards, judged, scores, imported, log=tmp_path / "view.log", process=True) as server:  # as a user runs it
        get = lambda **params: server.http.get("/", params={"output": "0"} | params)  # the Monte-Carlo labels
        everything = get()
        assert everything.status_code == 200 and sorted(solution_ids(everything.text)) == ["s0", "s1", "s2", "s3"]
        assert solution_ids(get(source="human", output="").text) == ["s1"] and "5 of 5 solutions" in get(output="").text
        assert "read-only: a folder of shards" in everything.text
        # Monte-Carlo against the judge: s0 agrees (none), s1 disagrees (1 vs 2), s2's MC first error is after an unlabelled step
        assert solution_ids(get(judge="agree").text) == ["s0"]
        assert solution_ids(get(judge="disagree").text) == ["s1"]
        assert solution_ids(get(judge="unknown").text) == ["s2"]
        assert solution_ids(get(judge="not-judged").text) == ["s3"]
        assert solution_ids(get(first_error="unknown").text) == ["s2"]
        assert solution_ids(get(first_error="none").text) == ["s0", "s3"]
        assert solution_ids(get(unlabelled="yes").text) == ["s2"]
        assert solution_ids(get(truncated="yes").text) == ["s3"]
        assert solution_ids(get(text="WRONGLY").text) == ["s1"]
        # PRM min: s2 is not fully scored, so it has no minimum: never inside a range, last in a sort
        assert solution_ids(get(prm_min="0.5").text) == ["s0"]
        assert solution_ids(get(prm_max="0.5").text) == ["s1"]
        by_score = get(sort="prm_min", order="desc").text
        assert solution_ids(by_score) == ["s0", "s1", "s2", "s3"] and "not fully scored" in by_score
        # one solution: its labels, the judge's critiques and the PRM's scores side by side; no rollouts kept here
        page = server.http.get("/solution/0/s1").text
        assert "vote 1: step 2" in page and "PRM scores.jsonl: 0.200" in page and "rollouts-link" not in page
        assert page.count(f"#1 {imported} (human): wrong (human)") == 1  # the imported human label beside the step
        assert 'name="action"' not in page  # read-only: no correction form
        assert server.http.post("/solution/0/s1/correct", data={"action": "wrong", "step_index": "1"}).status_code == 403
        # bad requests: a page that says what is wrong, never a traceback
        for path, status, says in (
            ("/?prm_min=abc", 400, "prm_min"),
            ("/?judge=maybe", 400, "judge"),
            ("/?sort=nonsense", 400, "sort"),
            ("/solution/0/nope", 404, "no solution"),
            ("/solution/7/s1", 404, "no solution"),
            ("/solution/0/s1/step/1", 200, "keeps no rollouts"),
        ):
            answer = server.http.get(path)
            assert answer.status_code == status and says in answer.text and "Traceback" not in answer.text, path
    assert "Traceback" not in (tmp_path / "view.log").read_text()


def test_a_trace_is_shown_as_its_thinking_then_its_response(tmp_path):
    trace = labels_row("p9", "s9", "Think first.", STEPS, [1.0] * 4, [True] * 4, thinking_steps=3)
    with ViewServer(write_labels(tmp_path / "trace", [trace]), log=tmp_path / "view.log") as server:
        page = server.http.get("/solution/0/s9").text
    assert page.index("<h3>Thinking</h3>") < page.index('id="step-0"') < page.index('id="step-2"') < page.index("<h3>Response</h3>") < page.index('id="step-3"')


@pytest.mark.engine
def test_a_bon_output_brings_its_kept_prm_scores(sample_labels_output, tmp_path):
    from labeler.decoding.prm_scores import METADATA_KEY, SCORES_DIR, SCORES_SCHEMA

    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    solutions = read_labelled_rows(out)
    table = pa.Table.from_pylist([{"solution_id": r.solution_id, "step_scores": [0.25] * len(r.steps)} for r in solutions], schema=SCORES_SCHEMA)
    (out / SCORES_DIR).mkdir(parents=True)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps({"spec": "checkpoint:runs/prm"}).encode()}), out / SCORES_DIR / "prm.parquet")
    with ViewServer(out, log=tmp_path / "view.log") as server:
        table_page = server.http.get("/").text
        assert "(bon, 3 of 3 units committed)" in table_page and "PRM scores: checkpoint:runs/prm" in table_page
        assert table_page.count("0.250") == len(solutions)
        assert "PRM checkpoint:runs/prm: 0.250" in server.http.get(f"/solution/0/{solutions[0].solution_id}").text


def test_a_shard_of_an_older_schema_reads_with_what_it_does_not_record_said(tmp_path):
    old = pa.Table.from_pylist(rows()).drop_columns(["n_truncated", "n_timeouts", "label_source", "trajectory_verdict", "trajectory_label", "thinking_steps"])
    folder = tmp_path / "old" / "labels"
    folder.mkdir(parents=True)
    pq.write_table(old, folder / "part-00000.parquet")
    with ViewServer(tmp_path / "old", log=tmp_path / "view.log") as server:
        table = server.http.get("/").text
        assert sorted(solution_ids(table)) == ["s0", "s1", "s2", "s3"] and "not recorded" in table
        assert solution_ids(server.http.get("/", params={"truncated": "not-recorded"}).text) == ["s0", "s1", "s2", "s3"]
        page = server.http.get("/solution/0/s3")
        assert page.status_code == 200 and "truncated not recorded" in page.text and "monte-carlo" in page.text


@pytest.mark.engine
def test_a_job_still_being_written_shows_its_committed_units_and_then_the_new_ones(sample_labels_output, tmp_path):
    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    last = manifest["units"][-1]
    finished = json.dumps(manifest)
    for key in ("files", "stats", "committed_at", "engine_record"):
        last.pop(key, None)
    last["state"] = "pending"  # its shards are on disk, as when the driver is killed before the commit
    manifest["totals"]["units_committed"] -= 1
    manifest_path.write_text(json.dumps(manifest))
    with ViewServer(out, log=tmp_path / "view.log") as server:
        table = server.http.get("/").text
        assert f"{8 - last['n_rows']} of {8 - last['n_rows']} solutions" in table and "still being written, or interrupted" in table
        manifest_path.write_text(finished)  # the unit commits
        time.sleep(1.5)
        assert "8 of 8 solutions" in server.http.get("/").text


@pytest.mark.engine
def test_corrections_are_kept_applied_by_every_reader_and_never_lost_between_two_reviewers(sample_labels_output, tmp_path):
    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    with ViewServer(out, "--reviewer", "ada", log=tmp_path / "ada.log") as ada, ViewServer(out, "--reviewer", "bob", log=tmp_path / "bob.log") as bob:
        ids = solution_ids(ada.http.get("/").text)
        assert len(ids) == 8
        hashes = {i: re.search(r'name="steps_hash" value="([0-9a-f]+)"', ada.http.get(f"/solution/0/{i}").text).group(1) for i in ids}
        failures = []

        def review(server, action, note):
            for solution_id in ids:
                for _ in range(2):
                    answer = server.http.post(
                        f"/solution/0/{solution_id}/correct",
                        data={"steps_hash": hashes[solution_id], "step_index": "0", "action": action, "note": note},
                        follow_redirects=False,
                    )
                    if answer.status_code != 303:
                        failures.append(answer.text)

        threads = [threading.Thread(target=review, args=(ada, "wrong", "ada says")), threading.Thread(target=review, args=(bob, "right", "bob says"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures
        # a stale page (the steps it showed are not the solution's) cannot save
        stale = ada.http.post(f"/solution/0/{ids[0]}/correct", data={"steps_hash": "0" * 16, "step_index": "0", "action": "wrong"})
        assert stale.status_code == 409 and "changed" in stale.text
        bad = ada.http.post(f"/solution/0/{ids[0]}/correct", data={"steps_hash": hashes[ids[0]], "step_index": "99", "action": "wrong"})
        assert bad.status_code == 400 and "step_index" in bad.text
        foreign = ada.http.post(
            f"/solution/0/{ids[0]}/correct", data={"steps_hash": hashes[ids[0]], "step_index": "0", "action": "wrong"}, headers={"origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
    corrections = read_corrections(out)
    assert len(corrections.records) == 32 and not corrections.bad  # 2 reviewers x 8 solutions x 2 saves: none lost
    assert {c.reviewer for c in corrections.records} == {"ada", "bob"}
    # the readers see the last correction of each step as a human label
    last = {}
    for c in corrections.records:
        last[c.solution_id] = c.action
    rows = {row.solution_id: row for row in read_labelled_rows(out)}
    for solution_id, action in last.items():
        row = rows[solution_id]
        assert row.label_source == "human" and row.label_method[0] == "human" and row.hard_labels[0] is (action == "right")
    # the job's own labels stay readable without them, and the report is of the labeling alone
    assert all(row.label_source == "monte-carlo" for row in read_labelled_rows(out / "labels"))
    # export carries them: a human hard label
    exported = tmp_path / "export.jsonl"
    assert main(["export", str(out), "--format", "jsonl", "--output", str(exported)]) == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sum(line.get("label_source") == "human" for line in lines) == 8


@pytest.mark.engine
def test_a_corrections_file_edited_by_hand_is_shown_and_training_refuses_it(sample_labels_output, tmp_path):
    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    solution = read_labelled_rows(out)[0]
    (out / "corrections").mkdir()
    (out / "corrections" / "by-hand.jsonl").write_text('{"solution_id": "' + solution.solution_id + '", "action": "wrong"}\nnot json\n')
    with ViewServer(out, log=tmp_path / "view.log") as server:
        table = server.http.get("/").text
        assert table.count('class="warn bad-correction"') == 2 and "by-hand.jsonl:1: problem_id: missing" in table
        assert "by-hand.jsonl:2: line: not JSON" in table
    with pytest.raises(LabelsError, match=r"2 corrections line\(s\) cannot be read .*by-hand.jsonl:1: problem_id: missing"):
        read_labelled_rows(out)
    assert main(["export", str(out), "--format", "jsonl", "--output", str(tmp_path / "x.jsonl")]) == 2


@pytest.mark.engine
def test_an_output_someone_else_owns_is_read_only_unless_writes_are_allowed(sample_labels_output, tmp_path):
    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    os.chown(out, os.geteuid() + 4242, -1)
    solution_id = read_labelled_rows(out)[0].solution_id
    with ViewServer(out, log=tmp_path / "view.log") as server:
        page = server.http.get(f"/solution/0/{solution_id}").text
        assert "you do not own this output" in page and 'value="wrong"' not in page
        assert server.http.post(f"/solution/0/{solution_id}/correct", data={"action": "wrong", "step_index": "0"}).status_code == 403
    with ViewServer(out, "--allow-writes", log=tmp_path / "view2.log") as server:
        assert 'value="wrong"' in server.http.get(f"/solution/0/{solution_id}").text
    with ViewServer(out, "--allow-writes", "--read-only", log=tmp_path / "view3.log") as server:
        assert "read-only: --read-only" in server.http.get(f"/solution/0/{solution_id}").text
    assert not (out / "corrections").exists()


def test_a_path_it_cannot_read_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    for path in (tmp_path / "missing", tmp_path / "empty", tmp_path / "notes.txt"):
        assert main(["view", str(path), "--port", "0"]) == 2
        error = capsys.readouterr().err
        assert str(path) in error and "Traceback" not in error
    assert main(["view", str(tmp_path / "empty"), "--reviewer", " "]) == 2


@pytest.mark.engine
def test_a_corrected_first_error_after_an_unlabelled_step_is_unknown(sample_labels_output, tmp_path):
    from labeler.store.corrections import new_correction, write_correction

    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    row = next(r for r in read_labelled_rows(out) if r.label_method[0] == "unlabelled" and len(r.steps) > 1)
    write_correction(out, new_correction(row.solution_id, row.problem_id, row.steps, "wrong", len(row.steps) - 1, "", "ada"))
    with ViewServer(out, log=tmp_path / "view.log") as server:
        page = server.http.get(f"/solution/0/{row.solution_id}").text
    shown = re.search(r'id="corrected-first-error">([^<]*)<', page).group(1)
    assert shown.startswith("unknown (an unlabelled step comes before step")


def test_every_sort_and_a_malformed_address_answer_a_page_and_unknown_first_errors_sort_last(shards, tmp_path):
    from labeler.review.index import SORTS

    with ViewServer(shards, log=tmp_path / "view.log") as server:
        for sort in SORTS:
            for order in ("asc", "desc"):
                answer = server.http.get("/", params={"sort": sort, "order": order})
                assert answer.status_code == 200 and len(solution_ids(answer.text)) == 4, (sort, order)
        # s0 and s3 have no error, s1's is step 1, s2's is after an unlabelled step: no position, last both ways
        assert solution_ids(server.http.get("/", params={"sort": "first_error"}).text) == ["s0", "s3", "s1", "s2"]
        assert solution_ids(server.http.get("/", params={"sort": "first_error", "order": "desc"}).text) == ["s1", "s0", "s3", "s2"]
        for path, status in (
            ("/solution/abc/s1", 404), ("/solution/99999999999/s1", 404), ("/solution/0/s1/step/9", 404),
            ("/solution/0/s1/step/x", 404), ("/explain/0/s1/x/0", 404), ("/explain/0/s1/0/0", 404), ("/?page=x", 400),
        ):  # fmt: skip
            answer = server.http.get(path)
            assert answer.status_code == status and answer.headers["content-type"].startswith("text/html"), path
            assert "Traceback" not in answer.text and '"detail"' not in answer.text, path
        # a page of another site whose name resolves to 127.0.0.1 (DNS rebinding) is not served
        assert server.http.get("/", headers={"host": "evil.example"}).status_code == 400
        assert server.http.get("/", headers={"host": "localhost"}).status_code == 200
    assert "Traceback" not in (tmp_path / "view.log").read_text()


def test_a_solution_id_with_slashes_and_question_marks_opens(tmp_path):
    odd = "gsm8k/train/7?v=1#a b"
    row = labels_row("p0", odd, "Odd id.", STEPS, [1.0, 0.5, 0.0, 0.0], [True, True, False, False])
    with ViewServer(write_labels(tmp_path / "odd", [row]), log=tmp_path / "view.log") as server:
        link = re.search(r'href="(/solution/0/[^"]+)"', server.http.get("/").text).group(1)
        assert link == "/solution/0/gsm8k%2Ftrain%2F7%3Fv%3D1%23a%20b"
        page = server.http.get(link)
        assert page.status_code == 200 and "Odd id." in page.text
        assert server.http.get(link + "/step/2").status_code == 200


def test_prm_scores_of_another_number_of_steps_are_not_fully_scored(shards, tmp_path):
    scores = tmp_path / "scores.jsonl"
    lines = [{"solution_id": "s0", "step_scores": [0.9, 0.9, 0.9]}, {"solution_id": "s1", "step_scores": [0.9, 0.8, 0.7, 0.6, 0.1]}]
    scores.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ViewServer(shards, scores, log=tmp_path / "view.log") as server:
        assert solution_ids(server.http.get("/", params={"prm_min": "0"}).text) == []
        assert server.http.get("/").text.count("not fully scored") == 2


def test_a_shard_rewritten_between_two_listings_is_read_again_not_shown_as_another_solution(shards, tmp_path):
    with ViewServer(shards, log=tmp_path / "view.log") as server:
        assert server.http.get("/").status_code == 200  # the shards were just listed: not again for a second
        first = shards / "labels" / "part-00000.parquet"
        pq.write_table(pq.read_table(first).take([1, 0]), first)  # s1 now comes before s0
        page = server.http.get("/solution/0/s0").text
        assert "Double one three times." in page and "Double one twice, wrongly." not in page


def test_a_queue_written_as_parquet_is_read_like_its_jsonl(shards, tmp_path):
    queue = tmp_path / "queue.parquet"
    line = {"solution_id": "s2", "queue": "uncertain", "queue_rank": 1, "queue_score": 0.9, "queue_reason": "PRM step 1 scores 0.45", "steps": STEPS}
    pq.write_table(pa.Table.from_pylist([line]), queue)
    with ViewServer(shards, queue, log=tmp_path / "view.log") as server:
        assert solution_ids(server.http.get("/", params={"queued": "yes"}).text) == ["s2"]
        assert "PRM step 1 scores 0.45" in server.http.get("/solution/0/s2").text


def test_a_bad_score_or_queue_record_or_shard_is_one_line_and_exit_2(shards, tmp_path, capsys):
    bad_scores = tmp_path / "scores.jsonl"
    bad_scores.write_text(json.dumps({"solution_id": "s0", "step_scores": [0.5]}) + "\n" + json.dumps({"solution_id": "s1", "step_scores": "high"}) + "\n")
    no_rank = tmp_path / "queue.jsonl"
    no_rank.write_text(json.dumps({"solution_id": "s0", "queue_rank": 1, "steps": STEPS}) + "\n" + json.dumps({"solution_id": "s1"}) + "\n")
    no_steps = tmp_path / "queue-without-steps.jsonl"
    no_steps.write_text(json.dumps({"solution_id": "s0", "queue_rank": 1}) + "\n")
    not_parquet = tmp_path / "broken"
    (not_parquet / "labels").mkdir(parents=True)
    (not_parquet / "labels" / "part-00000.parquet").write_text("not parquet")
    mixed = write_labels(tmp_path / "mixed", rows())
    shutil.copy(write_judgments(tmp_path / "judged", [judgment("s0", [-1])]) / "judgments" / "part-00000.parquet", mixed / "labels" / "part-00009.parquet")
    for args, says in (
        ([shards, bad_scores], "record 2: not a line of `labeler score`: step_scores"),
        ([shards, no_rank], "record 2: not a queue line: queue_rank: None"),
        ([shards, no_steps], "record 1: not a queue line: no steps (a list of strings) or response"),
        ([not_parquet], "not a Parquet file"),
        ([mixed], "labels and judgments shards in one folder"),
    ):
        assert main(["view", *map(str, args), "--port", "0"]) == 2
        error = capsys.readouterr().err
        assert says in error and "Traceback" not in error and len(error.strip().splitlines()) == 1, error


@pytest.mark.engine
def test_a_committed_shard_that_is_gone_is_one_line_and_exit_2(sample_labels_output, tmp_path, capsys):
    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    next((out / "labels").glob("*.parquet")).unlink()
    assert main(["view", str(out), "--port", "0"]) == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and "labels/" in error and len(error.strip().splitlines()) == 1, error


@pytest.mark.engine
def test_the_table_filters_a_reviewed_solution_by_its_corrected_labels_and_rereads_a_file_edited_in_place(sample_labels_output, tmp_path):
    from labeler.store.corrections import new_correction, write_correction

    out = Path(shutil.copytree(sample_labels_output, tmp_path / "out"))
    row = next(r for r in read_labelled_rows(out) if r.first_error is None or r.first_error >= 0 or "unlabelled" in r.label_method)  # not "none"
    name = write_correction(out, new_correction(row.solution_id, row.problem_id, row.steps, "no_error", None, "", "ada"))
    with ViewServer(out, log=tmp_path / "view.log") as server:
        get = lambda **params: solution_ids(server.http.get("/", params=params).text)
        assert row.solution_id in get(first_error="none") and row.solution_id not in get(first_error="some")
        assert get(source="human") == [row.solution_id] and get(method="human") == [row.solution_id]
        # the same file rewritten with the same name, as by hand: the table follows it
        (out / name).write_text(json.dumps(new_correction(row.solution_id, row.problem_id, row.steps, "first_error", 0, "", "ada").record()) + "\n")
        time.sleep(1.1)
        assert row.solution_id in get(first_error="some") and row.solution_id not in get(first_error="none")


def test_an_id_that_ends_like_a_step_address_and_a_score_list_of_another_length_show_what_they_are(tmp_path):
    tricky = [labels_row("p0", "a/step/1", "Tricky id.", STEPS, [1.0] * 4, [True] * 4), labels_row("p1", "a", "Plain id.", STEPS, [1.0] * 4, [True] * 4)]
    scores = tmp_path / "scores.jsonl"
    scores.write_text(json.dumps({"solution_id": "a", "step_scores": [0.9, 0.8]}) + "\n")
    empty_queue = tmp_path / "queue.jsonl"
    empty_queue.write_text("")
    with ViewServer(write_labels(tmp_path / "tricky", tricky), scores, empty_queue, log=tmp_path / "view.log") as server:
        page = server.http.get("/solution/0/a%2Fstep%2F1")
        assert page.status_code == 200 and "Tricky id." in page.text
        assert server.http.get("/solution/0/a/step/1").status_code == 200 and "Tricky id." in server.http.get("/solution/0/a/step/1").text
        plain = server.http.get("/solution/0/a").text
        assert "its scores are of 2 steps, not 4: not shown" in plain and "0.900" not in plain
        answer = server.http.get("/", params={"output": "²"})
        assert answer.status_code == 400 and "output" in answer.text
    assert "queue.jsonl is empty" in (tmp_path / "view.log").read_text()


def test_a_nan_step_score_stops_the_start_with_its_record(shards, tmp_path, capsys):
    scores = tmp_path / "scores.jsonl"
    scores.write_text('{"solution_id": "s0", "step_scores": [0.9, NaN, 0.5, 0.5]}\n')
    assert main(["view", str(shards), str(scores), "--port", "0"]) == 2
    assert "record 1: not a line of `labeler score`: step_scores" in capsys.readouterr().err


def test_a_judgment_or_queue_line_of_other_steps_under_the_same_id_is_shown_as_another_solutions(shards, tmp_path):
    """Another run's sampled solutions share ids with these: its judgments and queue lines are of other steps."""
    other_steps = ["3 + 1 = 4.", "4 * 2 = 8.", "8 - 5 = 3.", "The answer is: 3"]
    judged = write_judgments(
        tmp_path / "judged",
        [judgment("s0", [-1, -1], steps=STEPS), judgment("s1", [2, 2], steps=other_steps), judgment("s3", [0, 0], steps=STEPS[:3])],
    )
    later = write_judgments(tmp_path / "judged-later", [judgment("s3", [-1, -1], steps=STEPS)])  # s3's own, in a second output
    queue = tmp_path / "queue.jsonl"
    lines = [
        {"solution_id": "s1", "queue": "uncertain", "queue_rank": 1, "queue_reason": "of the other s1", "steps": other_steps},
        {"solution_id": "s0", "queue": "uncertain", "queue_rank": 2, "queue_reason": "of this s0", "steps": STEPS},
        {"solution_id": "s2", "queue": "uncertain", "queue_rank": 3, "queue_reason": "of another s2", "response": "<think>\nno\n</think>\n\nno"},
    ]
    queue.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with ViewServer(shards, judged, later, queue, log=tmp_path / "view.log") as server:
        get = lambda **params: solution_ids(server.http.get("/", params=params).text)
        # s1: Monte-Carlo says step 1, the other solution's judge step 2: never a disagreement
        assert get(judge="disagree") == [] and get(judge="agree") == ["s0", "s3"]
        assert get(judge="other-solution") == ["s1"] and get(judge="not-judged") == ["s2"]
        assert "judged a different solution with this id" in server.http.get("/", params={"judge": "other-solution"}).text
        page = server.http.get("/solution/0/s1").text
        assert "judged a different solution with this id" in page and "vote 1: step 2" not in page
        assert "queued a different solution with this id" in page and "of the other s1" not in page
        s3 = server.http.get("/solution/0/s3").text  # the first output's is another's; the second's is its own
        assert "judged a different solution with this id (3 steps" in s3 and "vote 1: no error" in s3
        assert get(queued="yes") == ["s0"] and "of this s0" in server.http.get("/solution/0/s0").text
        assert "queued a different solution with this id" in server.http.get("/solution/0/s2").text


def import_prm800k(out: Path) -> Path:
    """A real `labeler import` output (no model): a job's output, writable, with a manifest."""
    from tests.test_import import PRM800K

    assert main(["import", "--preset", "prm800k", "--input", str(PRM800K), "--output", str(out), "--quiet"]) == 0
    return out


def test_an_import_output_is_shown_as_an_import(tmp_path):
    out = import_prm800k(tmp_path / "imported")
    with ViewServer(out, log=tmp_path / "view.log") as server:
        table = server.http.get("/").text
    assert f"<b>{out}</b> (import, " in table
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["job"]  # an import written before imports recorded their kind
    (out / "manifest.json").write_text(json.dumps(manifest))
    with ViewServer(out, log=tmp_path / "view-older.log") as server:
        assert f"<b>{out}</b> (import, " in server.http.get("/").text


def test_every_interface_needs_allowed_host_names_and_another_name_is_refused(tmp_path, capsys):
    out = import_prm800k(tmp_path / "imported")
    capsys.readouterr()  # the import's own lines
    assert main(["view", str(out), "--host", "0.0.0.0", "--port", "0"]) == 2
    error = capsys.readouterr().err
    assert "--allowed-host NAME" in error and len(error.strip().splitlines()) == 1, error
    with ViewServer(out, "--host", "0.0.0.0", "--allowed-host", "review.lab.example", log=tmp_path / "view.log") as server:
        port = server.url.rsplit(":", 1)[1]
        solution_id = read_labelled_rows(out)[0].solution_id
        path = f"/solution/0/{solution_id}"
        good, evil = f"review.lab.example:{port}", f"rebound.evil.example:{port}"
        assert server.http.get("/", headers={"Host": good}).status_code == 200
        assert server.http.get(path, headers={"Host": "localhost:" + port}).status_code == 200
        # a page of another site whose name now resolves here (DNS rebinding) sends its own Host and a matching Origin
        assert 400 <= server.http.get(path, headers={"Host": evil}).status_code < 500
        form = {"action": "wrong", "step_index": "0", "steps_hash": "x"}
        posted = server.http.post(f"{path}/correct", data=form, headers={"Host": evil, "Origin": f"http://{evil}"})
        assert 400 <= posted.status_code < 500 and not (out / "corrections").exists()
        page = server.http.get(path, headers={"Host": good}).text
        form["steps_hash"] = re.search(r'name="steps_hash" value="([^"]+)"', page).group(1)
        saved = server.http.post(f"{path}/correct", data=form, headers={"Host": good, "Origin": f"http://{good}"})
        assert saved.status_code == 303 and len(read_corrections(out).records) == 1


def test_an_allowed_host_with_a_port_or_scheme_is_refused_at_start_and_capitals_are_served(shards, tmp_path, capsys):
    from labeler.review.config import ViewConfig

    for given in ("review.lab.example:8765", "[fe80::1]:8765", "http://review.lab.example", "https:review"):
        with pytest.raises(ValueError, match=f"--allowed-host {re.escape(repr(given))}") as refused:
            ViewConfig(host="0.0.0.0", allowed_host=(given,))  # `labeler view` says it in one line, exit 2 (the test above)
        assert len(str(refused.value).splitlines()) == 1
    with ViewServer(shards, "--host", "0.0.0.0", "--allowed-host", "Review.Lab.Example", "--allowed-host", "FE80::1", log=tmp_path / "view.log") as server:
        port = server.url.rsplit(":", 1)[1]
        for host in (f"review.lab.example:{port}", f"REVIEW.lab.example:{port}", f"[fe80::1]:{port}"):
            assert server.http.get("/", headers={"Host": host}).status_code == 200, host


def test_a_first_error_written_as_undetermined_is_unknown_in_the_table_and_on_its_page(tmp_path):
    undetermined = labels_row("p5", "s5", "An unlabelled step first.", STEPS, [1.0, None, 0.0, 0.0], [True, None, False, False])
    undetermined["first_error"] = None  # schema 1.6: null where an unlabelled step comes before the first wrong one
    with ViewServer(write_labels(tmp_path / "labels", [undetermined]), log=tmp_path / "view.log") as server:
        assert solution_ids(server.http.get("/", params={"first_error": "unknown"}).text) == ["s5"]
        assert solution_ids(server.http.get("/", params={"first_error": "some"}).text) == []
        page = server.http.get("/solution/0/s5")
        assert page.status_code == 200 and "unknown (an unlabelled step comes before step 2)" in page.text
