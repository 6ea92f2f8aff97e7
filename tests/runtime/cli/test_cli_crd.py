"""`watchkeeper crd MODULE:CLASS...` prints the CRDs of resource classes as YAML for
`kubectl apply -f -`; a class that cannot become a CRD is one `error:` line, exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import watchkeeper as wk

from ..typed.website import EXAMPLE, Website
from .test_cli_errors import cli, error_line

pytestmark = pytest.mark.realtime

RESOURCES = """\
from __future__ import annotations

import watchkeeper as wk


class Spec(wk.Schema):
    '''What a thing is.

    Second paragraph.'''

    size: int = 1


@wk.custom_resource(group="example.com", version="v1", kind="Thing")
class ThingV1(wk.CustomResource):
    spec: Spec


@wk.custom_resource(group="example.com", version="v2", kind="Thing", storage=True)
class ThingV2(wk.CustomResource):
    spec: Spec


@wk.custom_resource(group="example.com", version="v1")
class Other(wk.CustomResource):
    spec: Spec


class Bad(wk.Schema):
    z: complex = 0j


@wk.custom_resource(group="example.com", version="v1")
class Broken(wk.CustomResource):
    spec: Bad


nothing = 3
"""


async def test_prints_the_example_crd_as_yaml() -> None:
    code, out, err = await cli("crd", f"{EXAMPLE}:Website")
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert docs == [wk.crd(Website)]
    assert out.startswith("---\napiVersion: apiextensions.k8s.io/v1\n"
                          "kind: CustomResourceDefinition")


async def test_a_file_target_imports_the_modules_beside_it(tmp_path: Path) -> None:
    """examples/website_operator.py imports its resource from website.py beside it: a file
    target has its own directory first on sys.path, as ``python file.py`` has (before: a
    ModuleNotFoundError, from any other directory)."""
    operator = EXAMPLE.with_name("website_operator.py")
    code, out, err = await cli("crd", f"{operator}:Website", cwd=tmp_path)
    assert code == 0, err
    assert list(yaml.safe_load_all(out)) == [wk.crd(Website)]


async def test_versions_of_one_resource_make_one_crd(tmp_path: Path) -> None:
    module = tmp_path / "things.py"
    module.write_text(RESOURCES)
    code, out, err = await cli("crd", f"{module}:ThingV1", f"{module}:Other",
                               f"{module}:ThingV2")
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert [d["metadata"]["name"] for d in docs] == ["things.example.com", "others.example.com"]
    assert [(v["name"], v["storage"]) for v in docs[0]["spec"]["versions"]] == [
        ("v1", False), ("v2", True)]
    # a multi-line description is a block, as a person would write it
    assert re.search(r"description: \|-\n +What a thing is\.\n\n +Second paragraph\.\n", out)
    # a module name works too, from the current directory
    code, out, err = await cli("crd", "things:Other", cwd=tmp_path)
    assert code == 0, err
    assert yaml.safe_load(out)["metadata"]["name"] == "others.example.com"


@pytest.mark.parametrize(("target", "message"), [
    ("{module}", "'{module}': name the class, as module:Class or path/to/file.py:Class"),
    ("{module}:Nope", "'{module}' has no attribute 'Nope'"),
    ("{module}:nothing", "{module}:nothing is 3, not a wk.CustomResource class"),
    ("{module}:Spec", "{module}:Spec is <class 'things.Spec'>, not a wk.CustomResource class"),
    ("{module}:Broken", "Bad.z: <class 'complex'> has no Kubernetes schema"),
    ("{missing}:Thing", "no such file: {missing}"),
    ("{raising}:Thing", "cannot load {raising}:Thing: SchemaError: ThingV1: group 'example' "
                        "must be a DNS subdomain with a dot"),
])
async def test_mistakes_are_one_error_line(tmp_path: Path, target: str, message: str) -> None:
    paths = {"module": tmp_path / "things.py", "missing": tmp_path / "missing.py",
             "raising": tmp_path / "raising.py"}
    paths["module"].write_text(RESOURCES)
    paths["raising"].write_text(RESOURCES.replace('group="example.com", version="v1", '
                                                  'kind="Thing"', 'group="example", version="v1", '
                                                  'kind="Thing"'))
    code, out, err = await cli("crd", target.format(**paths))
    assert code == 2, err
    assert out == ""
    assert error_line(err).startswith(f"error: {message.format(**paths)}"), err
