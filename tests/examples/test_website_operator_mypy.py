"""``mypy --strict`` checks the typed example operator (examples/website_operator.py, with the
website.py it imports): it passes (``make typecheck`` checks examples/ too), and the same
operator with a planted type error fails, naming that error and no other."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runtime.typed.mypy_strict import run_mypy as _mypy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PLANTED = {
    "a typo in a spec field": (
        "\n\ndef bad(site: Website) -> None:\n    site.spec.replica = 3\n",
        '"WebsiteSpec" has no attribute "replica"'),
    "a status field of the wrong type": (
        "\n\ndef bad(site: Website) -> None:\n"
        "    site.status = WebsiteStatus(replicas='3')\n",
        'Argument "replicas" to "WebsiteStatus" has incompatible type "str"'),
    "a Deployment field of the wrong type": (
        "\n\ndef bad(site: Website) -> wk.k8s.DeploymentSpec:\n"
        "    return wk.k8s.DeploymentSpec(replicas=site.spec.image,\n"
        "                                 selector=wk.k8s.LabelSelector(),\n"
        "                                 template=wk.k8s.PodTemplateSpec())\n",
        'Argument "replicas" to "DeploymentSpec" has incompatible type "str"'),
    "a reconcile for another class": (
        "\n\nasync def other(dep: wk.k8s.Deployment, ctx: Websites) -> wk.Action:\n"
        "    return wk.Action.await_change()\n\n\n"
        "def bad(client: wk.Client) -> wk.Operator:\n"
        "    ctl, ctx = controller(client)\n"
        "    return ctl.operator(other, context=ctx)\n",
        'Argument 1 to "operator" of "TypedController" has incompatible type'),
    "an Optional read as if always there": (
        "\n\ndef bad(dep: wk.k8s.Deployment) -> int:\n"
        "    return dep.status.available_replicas or 0\n",
        'Item "None" of "DeploymentStatus | None" has no attribute "available_replicas"'),
}




@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def _copy(tmp_path: Path, extra: str = "") -> Path:
    """The operator and the module it imports, side by side in a directory of their own."""
    shutil.copy(EXAMPLES / "website.py", tmp_path / "website.py")
    operator = tmp_path / "website_operator.py"
    operator.write_text((EXAMPLES / "website_operator.py").read_text() + extra)
    return operator


def test_the_example_operator_passes_mypy_strict(cache: Path, tmp_path: Path) -> None:
    out, status = _mypy(_copy(tmp_path), cache)
    assert status == 0, out


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_planted_type_error_fails(case: str, cache: Path, tmp_path: Path) -> None:
    code, message = PLANTED[case]
    out, status = _mypy(_copy(tmp_path, code), cache)
    assert status == 1, out
    assert message in out, out
    assert out.count(": error:") == 1, out  # that error, and nothing else
