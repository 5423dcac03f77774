"""`labeler report`: an HTML page with embedded PNG plots, and the PNG files beside it."""

import base64
import io
import re

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from labeler.cli import main
from schemas import REJECTED_SCHEMA
from tests.synthetic_labels import arithmetic_rows, write_labels

PLOTS = ("soft_labels.png", "first_error.png", "soft_label_by_step.png", "spend.png", "rejected.png")


def write_rejected(job, reasons):
    folder = job / "rejected"
    folder.mkdir(exist_ok=True)
    rows = [
        {"row_index": i, "problem_id": None, "stage": "input", "field": field, "reason": reason, "raw": "{}"}
        for i, (field, reason) in enumerate(reasons)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=REJECTED_SCHEMA), folder / "input.parquet")


def test_report_writes_a_page_and_png_plots(tmp_path, capsys):
    job = write_labels(tmp_path / "job", arithmetic_rows(problems=10, solutions_per_problem=3, seed=0))
    write_rejected(
        job,
        [
            ("row", "12034 characters of text, over max_row_chars=50000"),
            ("row", "60001 characters of text, over max_row_chars=50000"),
            ("answer", "missing column 'answer'"),
        ],
    )
    assert main(["report", str(job)]) == 0
    page = job / "report" / "index.html"
    assert capsys.readouterr().out.strip() == str(page)
    for name in PLOTS:
        with Image.open(job / "report" / name) as image:
            image.verify()
            assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 150
    html = page.read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(embedded) == len(PLOTS)
    for data in embedded:
        assert Image.open(io.BytesIO(base64.b64decode(data))).format == "PNG"
    assert not re.search(r'src="(?!data:)', html)  # self-contained: nothing loaded from elsewhere
    assert "<th>solutions</th><td class=number>30</td>" in html
    # numbers in reasons are folded, so the two over-long rows count as one reason
    assert "input / row: N characters of text, over max_row_chars=N</td><td class=number>2</td>" in html


def test_report_of_a_job_without_labels_exits_2(tmp_path, capsys):
    (tmp_path / "job").mkdir()
    assert main(["report", str(tmp_path / "job")]) == 2
    assert capsys.readouterr().err.startswith("labeler report: error:")
