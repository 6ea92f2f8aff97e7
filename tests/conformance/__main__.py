"""``python -m conformance {live,record,sim}`` (from tests/, as the Makefile runs it).

live    every scenario on the real server and on the simulator, side by side: a diff per
        scenario that differs, and whether that was expected (its ``differs`` reason);
        also says where the real server no longer answers as its fixture. Exit 1 on a
        difference not listed as expected, or a listed one that is gone.
record  every scenario on the real server: its fixture is (re)written.
sim     every scenario on the simulator against its fixture, offline (what make test does,
        with the diffs printed).

The real server: --kubeconfig (default: WATCHKEEPER_E2E_KUBECONFIG), --context (default:
WATCHKEEPER_E2E_CONTEXT). It needs cluster-admin: each scenario creates and deletes a
namespace ``PREFIX-SCENARIO`` and CRDs in the group ``PREFIX-SCENARIO.example.com``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from conformance import fixtures
from conformance.runner import Target, run_scenario, server_version, simulator
from conformance.scenarios import ALL
from conformance.steps import Scenario


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("live", "record", "sim"))
    parser.add_argument("--kubeconfig", default=os.environ.get("WATCHKEEPER_E2E_KUBECONFIG"))
    parser.add_argument("--context", default=os.environ.get("WATCHKEEPER_E2E_CONTEXT") or None)
    parser.add_argument("--prefix", default=os.environ.get("WATCHKEEPER_CONFORMANCE_PREFIX",
                                                           "diff"))
    parser.add_argument("-k", dest="only", default="",
                        help="only scenarios whose name contains this")
    parser.add_argument("--jobs", type=int, default=4, help="scenarios run at once")
    args = parser.parse_args()
    scenarios = [s for s in ALL if args.only in s.name]
    if not scenarios:
        parser.error(f"no scenario name contains {args.only!r}")
    real = None
    if args.mode != "sim":
        if not args.kubeconfig:
            parser.error("set WATCHKEEPER_E2E_KUBECONFIG (or --kubeconfig) to a real cluster's")
        real = Target("cluster", args.kubeconfig, args.context)
    return asyncio.run(_main(args.mode, scenarios, real, args.prefix, max(1, args.jobs)))


async def _main(mode: str, scenarios: list[Scenario], real: Target | None, prefix: str,
                jobs: int) -> int:
    gate = asyncio.Semaphore(jobs)
    version = await server_version(real) if real is not None else ""
    if real is not None:
        print(f"real server: {version}", flush=True)

    async def one(scenario: Scenario) -> bool:
        async with gate:
            try:
                return await _one(mode, scenario, real, prefix, version)
            except Exception:  # one broken scenario must not hide the others' results
                print(f"== {scenario.name}: FAILED TO RUN\n{traceback.format_exc()}",
                      flush=True)
                return False

    results = await asyncio.gather(*(one(s) for s in scenarios))
    bad = [s.name for s, ok in zip(scenarios, results, strict=True) if not ok]
    print(f"\n{len(scenarios) - len(bad)} of {len(scenarios)} scenarios as expected"
          + (f"; not: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


async def _one(mode: str, scenario: Scenario, real: Target | None, prefix: str,
               version: str) -> bool:
    real_steps: list[dict[str, Any]] | None = None
    if real is not None:
        real_steps = await run_scenario(real, scenario, prefix=prefix)
    if mode == "record":
        assert real_steps is not None
        fixtures.save(scenario, real_steps, version)
        print(f"recorded {scenario.name} ({len(real_steps)} steps)", flush=True)
        return True
    with tempfile.TemporaryDirectory() as tmp:
        async with simulator(Path(tmp)) as sim:
            sim_steps = await run_scenario(sim, scenario, prefix=prefix)
    out: list[str] = []
    fixture = fixtures.load(scenario)
    if real_steps is None:  # sim mode
        if fixture is None:
            print(f"== {scenario.name}: NO FIXTURE (make conformance-record)", flush=True)
            return False
        real_steps, real_name = fixture, "real (fixture)"
    else:
        real_name = "real"
        if fixture is None:
            out.append("  (no fixture yet: make conformance-record)")
        elif fixture != real_steps:
            out.append("  the real server no longer answers as its fixture:")
            out.append(fixtures.diff(fixture, real_steps, "fixture", "real"))
    text = fixtures.diff(real_steps, sim_steps, real_name, "simulator")
    if not text:
        verdict = ("MATCHES, but is listed as an expected difference" if scenario.differs
                   else "matches")
    else:
        verdict = (f"differs, as expected: {scenario.differs}" if scenario.differs
                   else "DIFFERS")
    ok = bool(text) == bool(scenario.differs)
    print("\n".join([f"== {scenario.name}: {verdict}", *out, *([text] if text else [])]),
          flush=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
