"""``mypy --strict`` checks a user's typed operator: the operator module passes, and the
same module with a planted type error fails, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from .mypy_strict import run_mypy as _mypy

OPERATOR = Path(__file__).with_name("typed_operator.py")
VERSIONS = Path(__file__).with_name("versions.py")

PLANTED = {
    "typo in a spec field": (
        "\n\ndef bad(site: Site) -> None:\n    site.spec.replica = 2\n",
        '"SiteSpec" has no attribute "replica"'),
    "metadata is typed": (
        "\n\ndef bad(site: Site) -> str:\n    return site.metadata.generation\n",
        'Incompatible return value type (got "int | None", expected "str")'),
    "a reconcile of another class": (
        "\n\nasync def other(site: NarrowSite, ctx: Any) -> wk.Action:\n"
        "    return wk.Action.await_change()\n\n\n"
        "async def bad(client: wk.Client) -> None:\n"
        "    ctl, _ = controller(client)\n    await ctl.run(other)\n",
        'Argument 1 to "run" of "TypedController" has incompatible type'),
    "a built-in kind's field": (
        "\n\ndef bad(site: Site) -> wk.k8s.DeploymentSpec:\n"
        "    return wk.k8s.DeploymentSpec(replicas='2', selector=wk.k8s.LabelSelector(),\n"
        "                                 template=wk.k8s.PodTemplateSpec())\n",
        'Argument "replicas" to "DeploymentSpec" has incompatible type "str"'),
    "a typed get": (
        "\n\nasync def bad(api: wk.TypedApi[Site]) -> NarrowSite:\n"
        "    return await api.get('x')\n",
        'Incompatible return value type (got "Site", expected "NarrowSite")'),
}




@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_the_typed_operator_passes_mypy_strict(cache: Path) -> None:
    out, status = _mypy(OPERATOR, cache)
    assert status == 0, out


def test_the_versions_and_their_conversions_pass_mypy_strict(cache: Path) -> None:
    out, status = _mypy(VERSIONS, cache)
    assert status == 0, out


def test_a_conversion_returning_another_version_fails(cache: Path, tmp_path: Path) -> None:
    planted = tmp_path / "planted_versions.py"
    planted.write_text(VERSIONS.read_text() + (
        "\n\n@wk.conversion(SiteV1alpha1, SiteV1)\n"
        "def wrong(old: SiteV1alpha1) -> SiteV1beta1:\n"
        "    return SiteV1beta1(spec=SpecV1beta1(image=old.spec.image))\n"))
    out, status = _mypy(planted, cache)
    assert status == 1 and out.count(": error:") == 1, out
    assert "SiteV1beta1" in out and "SiteV1" in out, out


@pytest.mark.parametrize("case", list(PLANTED))
def test_a_planted_type_error_fails(case: str, cache: Path, tmp_path: Path) -> None:
    code, message = PLANTED[case]
    planted = tmp_path / "planted_operator.py"
    planted.write_text(OPERATOR.read_text() + code)
    out, status = _mypy(planted, cache)
    assert status == 1, out
    assert message in out, out
    assert out.count(": error:") == 1, out  # that error, and nothing else
