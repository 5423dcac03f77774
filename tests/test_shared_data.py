"""Tests that read ../shared/data fail when it is missing, naming it, unless the run says it goes without it."""

import pytest

from tests import conftest


@pytest.fixture
def no_data_here(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "SHARED_DATA", tmp_path / "shared" / "data")
    monkeypatch.delenv(conftest.NO_SHARED_DATA, raising=False)
    return tmp_path / "shared" / "data"


def test_missing_shared_data_fails_naming_the_file_and_the_ways_out(no_data_here):
    with pytest.raises(pytest.fail.Exception) as failed:
        conftest.shared_data("processbench/gsm8k.jsonl")
    message = str(failed.value)
    assert f"{no_data_here / 'processbench' / 'gsm8k.jsonl'} is absent" in message
    assert f"{conftest.SHARED_DATA_DIR}=DIR" in message and f"{conftest.NO_SHARED_DATA}=1" in message


def test_a_run_that_says_it_goes_without_shared_data_skips_with_the_reason(no_data_here, monkeypatch):
    monkeypatch.setenv(conftest.NO_SHARED_DATA, "1")
    with pytest.raises(pytest.skip.Exception) as skipped:
        conftest.shared_data("processbench/gsm8k.jsonl")
    assert "is absent" in str(skipped.value) and f"{conftest.NO_SHARED_DATA}=1" in str(skipped.value)


def test_shared_data_that_is_there_is_returned(no_data_here):
    (no_data_here / "processbench").mkdir(parents=True)
    (no_data_here / "processbench" / "gsm8k.jsonl").write_text("{}\n")
    assert conftest.shared_data("processbench/gsm8k.jsonl") == no_data_here / "processbench" / "gsm8k.jsonl"


def test_no_test_skips_for_missing_shared_data_on_its_own():
    """Every test that reads the shared data goes through conftest.shared_data (no skipif of its own)."""
    from pathlib import Path

    offenders = [
        path.name
        for path in Path(__file__).parent.glob("test_*.py")
        if path.name != "test_shared_data.py" and '"shared" / "data"' in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
