"""watchkeeper-sim's pytest plugin: test an operator against the simulator, no cluster.

Loaded by pytest through the ``pytest11`` entry point once watchkeeper-sim is installed
(async fixtures need pytest-asyncio: ``pip install 'watchkeeper-sim[pytest]'``). Fixtures
(docs/guide.md, "Testing your operator"):

- ``k8s_sim``: a ``Simulator``: the session's shared server (started on first use, on a
  thread of its own) with a fresh namespace for this test, faults by name, clients. At the
  end of the test its faults, grants and namespace go. ``@pytest.mark.k8s_sim(**options)``
  gives the test a server of its own instead (``ApiServer`` options, e.g.
  ``garbage_collector=False``).
- ``k8s_namespace``: that namespace's name. ``k8s_client``: an admin ``watchkeeper.Client``
  whose default namespace it is.
- ``k8s_crds``: ``await k8s_crds("deploy/crd.yaml", ...)`` installs CRDs, Established.
- ``k8s_operator``: ``await k8s_operator(setup)`` runs an operator (an ``Operator``, a list,
  or a setup function called with a client of its own) until the end of the test; if it
  fails, the test fails.
- ``k8s_wait_for``: ``await k8s_wait_for(api, name, predicate, timeout)``, and
  ``.deletion(api, name)``: wait for an object's state; fails at once if an operator died.
- ``k8s_sim_session``: the shared server itself (a ``ServerThread``).
"""

from __future__ import annotations

import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim.model import JSON
from watchkeeper_sim.testing.crds import install_crds
from watchkeeper_sim.testing.operators import RunningOperator, Setup, start_operator
from watchkeeper_sim.testing.simulator import Simulator, namespace_name
from watchkeeper_sim.testing.thread import ServerThread
from watchkeeper_sim.testing.wait import DEFAULT_TIMEOUT, wait_for, wait_for_deletion

pytest_asyncio: types.ModuleType | None
try:
    import pytest_asyncio
except ImportError:  # the sync fixtures still work; the async ones say what is missing
    pytest_asyncio = None

MARKER = "k8s_sim"
_OPERATORS = pytest.StashKey[list[RunningOperator]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(**options): run this test on a simulator of its own, an "
                   "ApiServer with these options, instead of the session's shared one")


def _async_fixture(fn: Callable[..., Any]) -> Any:
    """pytest-asyncio's fixture (any asyncio_mode), or one that says it is missing."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(fn)

    def missing() -> None:
        pytest.fail(f"the {fn.__name__} fixture needs pytest-asyncio: "
                    "pip install 'watchkeeper-sim[pytest]'", pytrace=False)

    missing.__name__ = missing.__qualname__ = fn.__name__
    missing.__doc__ = fn.__doc__
    return pytest.fixture(missing)


# ---- the simulator -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def k8s_sim_session() -> Iterator[ServerThread]:
    """The session's shared simulator (an ``ApiServer`` on its own thread)."""
    with ServerThread() as thread:
        yield thread


@pytest.fixture
def k8s_sim(request: pytest.FixtureRequest) -> Iterator[Simulator]:
    """The simulator for this test, in a namespace of its own (see the module's doc)."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        shared: ServerThread = request.getfixturevalue("k8s_sim_session")
        sim = Simulator(shared, namespace_name(request.node.name))
        try:
            yield sim
        finally:
            sim.close()
        return
    if marker.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes ApiServer options by keyword")
    with ServerThread(**marker.kwargs) as own:
        yield Simulator(own, namespace_name(request.node.name))


@pytest.fixture
def k8s_namespace(k8s_sim: Simulator) -> str:
    """The name of this test's namespace."""
    return k8s_sim.namespace


@_async_fixture
async def k8s_client(k8s_sim: Simulator) -> AsyncIterator[wk.Client]:
    """An admin ``watchkeeper.Client`` for the simulator; its default namespace is the
    test's."""
    async with k8s_sim.client() as client:
        yield client


# ---- CRDs, operators, waiting --------------------------------------------------------------


@pytest.fixture
def k8s_crds(k8s_client: wk.Client) -> Callable[..., Awaitable[list[str]]]:
    """``await k8s_crds(*sources, timeout=10)``: install CRDs from YAML files or dicts and
    wait until they are Established; returns their names."""

    async def install(*sources: str | Path | JSON, timeout: float = 10.0) -> list[str]:
        return await install_crds(k8s_client, *sources, timeout=timeout)

    return install


OperatorTarget = wk.Operator | Sequence[wk.Operator] | Setup


@_async_fixture
async def k8s_operator(k8s_sim: Simulator, request: pytest.FixtureRequest
                       ) -> AsyncIterator[Callable[..., Awaitable[RunningOperator]]]:
    """``await k8s_operator(target, user="admin")``: run an operator in the background until
    the end of the test. ``target``: an ``Operator``, a list of them, or a setup function
    (``setup(client)``, as ``watchkeeper run`` calls it) given a client of its own as
    ``user``. At the end it is drained as SIGTERM would; if it failed, the test fails."""
    started: list[RunningOperator] = []
    request.node.stash[_OPERATORS] = started

    async def start(target: OperatorTarget, *, user: str = "admin") -> RunningOperator:
        setup = callable(target) and not isinstance(target, wk.Operator)
        op = await start_operator(target, k8s_sim.client(user) if setup else None)
        started.append(op)
        return op

    yield start
    unreported = []
    for op in reversed(started):
        try:
            await op.stop()
        except AssertionError as failure:
            if not op.reported:
                unreported.append(failure)
    if unreported:
        raise unreported[0]


class Waiter:
    """``k8s_wait_for``: ``wait_for`` and ``wait_for_deletion`` that know the test's
    operators, so a wait ends at once with the operator's error if one dies."""

    def __init__(self, node: pytest.Item) -> None:
        self._node = node

    @property
    def operators(self) -> list[RunningOperator]:
        return self._node.stash.get(_OPERATORS, [])

    async def __call__(self, api: wk.Api, name: str,
                       predicate: Callable[[JSON], Any] | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> JSON:
        """The object once ``predicate(obj)`` is true (or once it exists)."""
        return await wait_for(api, name, predicate, timeout, operators=self.operators)

    async def deletion(self, api: wk.Api, name: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Once the object is gone."""
        await wait_for_deletion(api, name, timeout, operators=self.operators)


@pytest.fixture
def k8s_wait_for(request: pytest.FixtureRequest) -> Waiter:
    """``await k8s_wait_for(api, name, predicate=None, timeout=10)``: see ``Waiter``."""
    return Waiter(request.node)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test that passed while its operator died fails: the operator's error is the
    test's."""
    result = yield
    for op in item.stash.get(_OPERATORS, []):
        failure = op.failure
        if failure is not None and not op.reported:
            op.reported = True
            raise failure
    return result
