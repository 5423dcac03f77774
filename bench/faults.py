"""The fault suite: faults an operator meets, injected into real runs, each checked against an
uninterrupted run of the same job, then the slow end-to-end cases `make test` leaves out. Prints
each case, its outcome and seconds.

The expensive cases (tests/test_faults.py, marked `faults`: engine and worker kills, kill storms of
the driver, a disk filled mid-run) start the real engine many times and are left out of `make
test`; the cheap ones (FAULT_FILES below: poison units, engine death with a stand-in engine
process, two drivers, storage errors, corrupt manifests and shards) also run in `make test`.

The slow cases (marked `slow` anywhere under tests/, pyproject.toml says so): more SIGKILLs, Ray and
subprocess runs of what other tests in `make test` cover already (a driver killed on Ray, a judge
killed, a judge on Ray workers, the world bench end to end, ...); each test says what covers it. Among
them every bench under bench/ that starts an engine, trains or starts a cluster, at its smallest size
(tests/test_benches_smallest.py: the cheap benches run there in `make test`).

    .venv/bin/python bench/faults.py               # every case: the fault files, then the slow cases
    .venv/bin/python bench/faults.py --only slow   # the slow cases alone (--only faults: the fault files alone)
    .venv/bin/python bench/faults.py -k storm      # the cases whose name matches, as pytest's -k

Exit status 0 when every case passed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULT_FILES = ["tests/test_faults.py", "tests/test_unit_failures.py", "tests/test_output_lock.py", "tests/test_storage_errors.py"]
# The two pytest runs, in order: (name, its arguments). `slow` minus `faults` (in FAULT_FILES already) and
# `cluster` (make cluster runs those).
PARTS = {
    "faults": FAULT_FILES,
    "slow": ["tests", "-m", "slow and not faults and not cluster"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", dest="select", help="only the cases whose name matches this pytest -k expression")
    parser.add_argument("--only", choices=sorted(PARTS), help="run one part: the fault files, or the slow cases")
    args = parser.parse_args(argv)
    cases = []
    with tempfile.TemporaryDirectory() as folder:
        for part, selection in PARTS.items():
            if args.only and part != args.only:
                continue
            report = Path(folder) / f"{part}.xml"
            command = [sys.executable, "-m", "pytest", "-q", *selection, f"--junitxml={report}", "-p", "no:cacheprovider"]
            if args.select:
                command += ["-k", args.select]
            print(f"running: {' '.join(command[2:])}", file=sys.stderr)
            subprocess.run(command, cwd=ROOT, stdout=sys.stderr)  # pytest's own report goes to stderr, the table to stdout
            if not report.exists():
                print(f"pytest wrote no report ({part})", file=sys.stderr)
                return 2
            cases += list(ElementTree.parse(report).getroot().iter("testcase"))
    failed = 0
    print(f"{'case':<80} {'outcome':<8} {'seconds':>8}")
    for case in cases:
        outcome, reason = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                outcome = {"failure": "FAILED", "error": "ERROR", "skipped": "skipped"}[kind]
                reason = (found.get("message") or "").splitlines()[0][:200] if found.get("message") else ""
                break
        failed += outcome in ("FAILED", "ERROR")
        print(f"{case.get('name'):<80} {outcome:<8} {float(case.get('time', 0)):>8.1f}")
        if reason:
            print(f"    {reason}")
    if not cases:
        print("no case ran", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
