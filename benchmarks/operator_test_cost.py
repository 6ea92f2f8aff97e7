"""What one operator test costs with watchkeeper-sim's pytest plugin.

The test is the guide's worked example (tests/examples/test_widget_operator_plugin.py):
install the Widget CRD from its YAML file, start examples/widget_operator.py, create a
Widget, wait for its ConfigMap and its Ready status; the operator is drained at the end.
A child pytest runs it ``--runs`` + 1 times in a row and reports each run's setup + call +
teardown time (JUnit XML); the first run pays for starting the session's shared server,
installing the CRD and the first imports, so the warm numbers are the other runs'. Both
modes of the ``k8s_sim`` fixture are measured: the session's shared server (a namespace per
test) and a server of the test's own (``@pytest.mark.k8s_sim()``).

    .venv/bin/python -m benchmarks.operator_test_cost --runs 20
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from benchmarks._common import PYTHON, ROOT, markdown_table, save_results, wait_for_quiet

EXAMPLE = ROOT / "tests" / "examples" / "test_widget_operator_plugin.py"
TEST = "test_a_widget_gets_its_configmap_and_a_ready_status"

TEST_FILE = """\
import importlib.util

import pytest

spec = importlib.util.spec_from_file_location("widget_example", {example!r})
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


{mark}
@pytest.mark.parametrize("run", range({runs}))
async def test_run(run, k8s_client, k8s_namespace, k8s_crds, k8s_operator, k8s_wait_for):
    await example.{test}(k8s_client, k8s_namespace, k8s_crds, k8s_operator, k8s_wait_for)
"""

MODES = {"shared server": "", "a server per test": "@pytest.mark.k8s_sim()"}


def measure(mode: str, runs: int) -> dict[str, Any]:
    """One child pytest: the per-run times (s), cold first, and the whole session's."""
    with tempfile.TemporaryDirectory(prefix="wk-optest-") as tmp:
        where = Path(tmp)
        (where / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n"
                                          "asyncio_default_fixture_loop_scope = function\n")
        (where / "test_cost.py").write_text(TEST_FILE.format(
            example=str(EXAMPLE), mark=MODES[mode], runs=runs + 1, test=TEST))
        report = where / "report.xml"
        other_load = wait_for_quiet()
        started = time.perf_counter()
        proc = subprocess.run(
            [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
             "-o", "junit_duration_report=total"],
            cwd=where, capture_output=True, text=True, timeout=600,
            env={"PYTHONPATH": str(ROOT / "examples"), "PATH": "/usr/bin:/bin"})
        session = time.perf_counter() - started
        if proc.returncode != 0:
            sys.exit(f"the child pytest failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        cases = list(ET.parse(report).getroot().iter("testcase"))
        times = [float(c.get("time", "nan")) for c in cases]
    warm = sorted(times[1:])
    return {"mode": mode, "runs": len(warm), "cold_s": times[0], "warm_s": times[1:],
            "median_s": statistics.median(warm), "min_s": warm[0], "max_s": warm[-1],
            "p90_s": warm[int(0.9 * (len(warm) - 1))], "session_s": session,
            "other_load": other_load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="warm runs per mode")
    args = parser.parse_args()
    results = [measure(mode, args.runs) for mode in MODES]
    rows = [[r["mode"], r["runs"], f"{1000 * r['median_s']:.0f}", f"{1000 * r['p90_s']:.0f}",
             f"{1000 * r['min_s']:.0f}", f"{1000 * r['max_s']:.0f}",
             f"{1000 * r['cold_s']:.0f}", f"{r['session_s']:.1f}", f"{r['other_load']:.1f}"]
            for r in results]
    print(markdown_table(["k8s_sim", "warm runs", "median ms", "p90 ms", "min ms", "max ms",
                          "first run ms", "whole pytest s", "other load"], rows))
    path = save_results("operator-test-cost", {"runs": args.runs, "results": results})
    print(f"\n{path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
