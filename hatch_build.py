"""Builds the optional C part of the watch stream, ``src/watchkeeper/_speedups.c`` (issue 25).

Compiled with the interpreter's own compiler settings (``sysconfig``) into the package
directory, so an editable install finds it too. Without a working compiler the wheel is
built without it and the stream runs its Python code (``watchkeeper.client._fast``);
``WATCHKEEPER_REQUIRE_SPEEDUPS=1`` makes that an error instead (CI sets it), and
``WATCHKEEPER_PURE_PYTHON=1`` skips the build.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "src/watchkeeper/_speedups.c"


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


class SpeedupsBuildHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or _flag("WATCHKEEPER_PURE_PYTHON"):
            return
        source = Path(self.root) / SOURCE
        target = source.with_name("_speedups" + str(sysconfig.get_config_var("EXT_SUFFIX")))
        try:
            if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
                self._compile(source, target)
        except (OSError, subprocess.CalledProcessError) as exc:
            said = getattr(exc, "stderr", "") or ""
            if _flag("WATCHKEEPER_REQUIRE_SPEEDUPS"):
                raise RuntimeError(f"the C speedups did not build: {exc}\n{said}") from exc
            print(f"watchkeeper: the C speedups were not built ({exc}; {said.strip()[:500]}); "
                  "the watch stream will run its Python code", file=sys.stderr)
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # an editable install imports it from src/ itself
            build_data["force_include"][str(target)] = f"watchkeeper/{target.name}"

    def _compile(self, source: Path, target: Path) -> None:
        ldshared = shlex.split(os.environ.get("LDSHARED") or
                               str(sysconfig.get_config_var("LDSHARED") or "cc -shared"))
        include = sysconfig.get_paths()["include"]
        tmp = target.with_suffix(".tmp")
        cmd = [*ldshared, "-O2", "-fPIC", "-Wall", f"-I{include}", str(source), "-o", str(tmp)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        tmp.replace(target)
