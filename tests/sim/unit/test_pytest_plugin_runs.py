"""The plugin in a user's own pytest run (a child pytest in a fresh directory): with
pytest-asyncio's default function-scoped loops, with session-scoped loops and a user's
session-scoped async fixture on the shared server, and in strict mode. In each, a test whose
operator dies fails with the operator's error even though its own body passed, and the
passing tests pass without errors at teardown."""

from __future__ import annotations

import asyncio
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.realtime

COMMON = '''
import asyncio

import pytest

import watchkeeper as wk

{marks}


def idle(client):
    async def reconcile(obj, ctx):
        return wk.Action.await_change()

    config = wk.ControllerConfig(max_unhealthy=0.3)
    return wk.Operator(wk.Controller(client.api("configmaps"), config=config), reconcile)


async def test_passes(k8s_client, k8s_operator, k8s_wait_for):
    await k8s_operator(idle)
    cms = k8s_client.api("configmaps")
    await cms.create({{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "x"}}}})
    await k8s_wait_for(cms, "x")


async def test_operator_dies_while_the_test_does_not_look(k8s_sim, k8s_operator):
    op = await k8s_operator(idle)
    k8s_sim.outage()
    while not op.done:
        await asyncio.sleep(0.05)
    # nothing here fails: the operator's death must


async def test_passes_again_after_that(k8s_client, k8s_namespace):
    assert (await k8s_client.api("configmaps").list()).items == []
'''

SESSION_FIXTURE = '''
import pytest_asyncio


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def session_client(k8s_sim_session):
    """A user's own session-wide client of the shared server."""
    async with wk.Client(k8s_sim_session.client_config()) as client:
        yield client


async def test_a_session_scoped_async_fixture(session_client, k8s_namespace):
    cms = session_client.api("configmaps", namespace=k8s_namespace)
    await cms.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}})
    assert [c["metadata"]["name"] for c in (await cms.list()).items] == ["s"]


async def test_the_session_client_still_works(session_client, k8s_namespace):
    cms = session_client.api("configmaps", namespace=k8s_namespace)
    assert (await cms.list()).items == []
'''

CONFIGS = {
    "function-loops": ("asyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n",
                       "", ""),
    "session-loops": ("asyncio_mode = auto\nasyncio_default_fixture_loop_scope = session\n"
                      "asyncio_default_test_loop_scope = session\n", "", SESSION_FIXTURE),
    "strict": ("asyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n",
               "pytestmark = pytest.mark.asyncio", ""),
}


@pytest.mark.parametrize("config", CONFIGS)
async def test_the_plugin_in_a_users_run(config: str, tmp_path: Path) -> None:
    ini, marks, extra = CONFIGS[config]
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}timeout = 60\n")
    (tmp_path / "test_user.py").write_text(COMMON.format(marks=marks) + extra)
    report = tmp_path / "report.xml"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        "-W", "error::pytest.PytestUnraisableExceptionWarning", f"--junitxml={report}",
        cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    text = out.decode()
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        assert len(kinds) <= 1, (case.get("name"), kinds, text[-3000:])
        outcomes[str(case.get("name"))] = kinds[0] if kinds else "passed"
        if kinds == ["failure"]:
            message = case.find("failure").get("message", "")  # type: ignore[union-attr]
            assert "OperatorFailed" in message and "ControllerUnhealthy" in message, message
    expected = {"test_passes": "passed", "test_passes_again_after_that": "passed",
                "test_operator_dies_while_the_test_does_not_look": "failure"}
    if extra:
        expected |= {"test_a_session_scoped_async_fixture": "passed",
                     "test_the_session_client_still_works": "passed"}
    assert outcomes == expected, text[-3000:]
    assert proc.returncode == 1, text[-3000:]


WITHOUT_ASYNCIO = '''
def test_sync_fixtures_work(k8s_sim, k8s_namespace):
    k8s_sim.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    assert k8s_sim.get("v1", "ConfigMap", "c")["metadata"]["namespace"] == k8s_namespace


def test_async_fixtures_say_what_is_missing(k8s_client):
    pass
'''


async def test_without_pytest_asyncio_the_async_fixtures_say_how_to_get_it(
        tmp_path: Path) -> None:
    """watchkeeper-sim does not require pytest-asyncio: without it the plugin still loads,
    its sync fixtures work, and an async one fails naming the extra to install."""
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 60\n")
    (tmp_path / "test_user.py").write_text(WITHOUT_ASYNCIO)
    # pytest-asyncio, as far as imports go, is not installed: a package of that name first
    # on sys.path fails to import (its plugin, and looptime's that needs it, are off)
    absent = tmp_path / "absent" / "pytest_asyncio"
    absent.mkdir(parents=True)
    (absent / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pytest_asyncio'\", "
        "name='pytest_asyncio')\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-p", "no:asyncio", "-p", "no:looptime_plugin",
        "-p", "no:cacheprovider", "-rA", cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(absent.parent)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    text = out.decode()
    assert "PASSED test_user.py::test_sync_fixtures_work" in text, text[-3000:]
    assert "ERROR test_user.py::test_async_fixtures_say_what_is_missing" in text, text[-3000:]
    assert ("\nthe k8s_client fixture needs pytest-asyncio: pip install "
            "'watchkeeper-sim[pytest]'\n" in text), text[-3000:]
