"""A new user's mistakes end the real `watchkeeper` command with one `error:` line and a
documented exit code (docs/errors.md), never a traceback: busy ports, unwritable files,
missing kubeconfigs, unknown contexts, requests the server rejects as the caller's fault."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import watchkeeper
import watchkeeper_sim
from watchkeeper.ops import HealthServer
from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.realtime

SRC = str(Path(watchkeeper.__file__).resolve().parents[1])  # this checkout's sources
SIM = str(Path(watchkeeper_sim.__file__).resolve().parents[1])  # and its simulator's

OPERATOR = """\
import watchkeeper as wk


def reconcile(obj, ctx):
    return wk.Action.await_change()


def setup(client):
    return wk.Operator(wk.Controller(client.api("configmaps", namespace="default")), reconcile)
"""


async def cli(*args: str, cwd: Path | None = None, timeout: float = 30,
              launcher: Path | None = None) -> tuple[int, str, str]:
    """Run the command in a child process; (exit code, stdout, stderr). ``launcher`` is a
    copy of the installed console script (its own directory first on sys.path, not the cwd)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, SIM]),
           "KUBECONFIG": "/nonexistent/kubeconfig"}
    head = [str(launcher)] if launcher else ["-m", "watchkeeper.cli"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *head, *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    reads = asyncio.gather(proc.stdout.read(), proc.stderr.read())
    try:
        async with asyncio.timeout(timeout):
            code = await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        _, err = await reads
        pytest.fail(f"`watchkeeper {' '.join(args)}` still running after {timeout} s; "
                    f"its stderr:\n{err.decode()[-2000:]}")
    out, err = await reads
    return code, out.decode(), err.decode()


def error_line(err: str) -> str:
    """The one `error:` line; no traceback anywhere."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that something else is listening on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


async def test_sim_on_a_busy_port_says_which_port_and_the_flag(busy_port: int) -> None:
    code, _, err = await cli("sim", "--empty", "--port", str(busy_port))
    line = error_line(err)
    assert code == 2, err
    assert f"port {busy_port} on 127.0.0.1 is already in use" in line and "--port" in line


async def test_sim_with_an_unwritable_kubeconfig_out_names_the_path(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "sim.kubeconfig"
    code, _, err = await cli("sim", "--empty", "--port", "0", "--kubeconfig-out", str(target))
    line = error_line(err)
    assert code == 2, err
    assert f"cannot write the kubeconfig {target}: No such file or directory" in line


async def test_sim_and_demo_without_the_simulator_say_how_to_install_it(
        tmp_path: Path) -> None:
    """Without the simulator `sim` and `demo` are still listed and say in one line where
    they come from. Here its entry points are declared but its package cannot be imported
    (a partial uninstall); .ci/runtime-wheel.sh checks the runtime wheel alone, with no
    entry points at all."""
    launcher = tmp_path / "watchkeeper"
    launcher.write_text("import sys\n"
                        "sys.modules['watchkeeper_sim'] = None  # as if not installed\n"
                        "from watchkeeper.cli import main\nsys.exit(main())\n")
    for command in ("sim", "demo"):
        code, _, err = await cli(command, "--port", "0", launcher=launcher)
        assert error_line(err) == (f"error: `watchkeeper {command}` comes with the simulator: "
                                   "pip install watchkeeper-sim")
        assert code == 2, err
    code, out, err = await cli("--help", launcher=launcher)
    assert code == 0, err
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert {"sim", "demo", "run", "watch", "status"} <= set(listed), out


def test_the_runtime_cli_mounts_the_simulators_own_commands() -> None:
    """With watchkeeper-sim installed, `watchkeeper sim|demo` are its commands, the same
    objects its own `watchkeeper-sim` script serves."""
    import click

    import watchkeeper_sim.cli as sim_cli
    from watchkeeper.cli import main

    ctx = click.Context(main)
    assert main.get_command(ctx, "sim") is sim_cli.sim
    assert main.get_command(ctx, "demo") is sim_cli.demo
    assert sim_cli.main.get_command(ctx, "sim") is sim_cli.sim
    assert main.get_command(ctx, "nope") is None


async def test_commands_of_other_distributions_come_through_entry_points(
        tmp_path: Path) -> None:
    """`watchkeeper` finds `sim` and `demo` as watchkeeper-sim declares them, in the
    `watchkeeper.commands` entry-point group, not by importing the simulator: a distribution
    on sys.path that declares a command there gets it run (and listed)."""
    site = tmp_path / "site"
    dist = site / "hello_cmd-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-cmd\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[watchkeeper.commands]\nhello = hello_cmd:hello\n")
    (site / "hello_cmd.py").write_text(
        "import click\n\n\n@click.command()\n@click.argument('who')\n"
        "def hello(who):\n    'Say hello.'\n    click.echo(f'hello, {who}')\n")
    launcher = tmp_path / "watchkeeper"
    launcher.write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\n"
                        "from watchkeeper.cli import main\nsys.exit(main())\n")
    code, out, err = await cli("hello", "world", launcher=launcher)
    assert (code, out) == (0, "hello, world\n"), err
    code, out, err = await cli("--help", launcher=launcher)
    assert code == 0 and re.search(r"^  hello +Say hello\.$", out, re.M), out


async def test_run_with_a_missing_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "op.py").write_text(OPERATOR)
    missing = tmp_path / "missing.kubeconfig"
    code, _, err = await cli("run", f"{tmp_path / 'op.py'}:setup", "--kubeconfig", str(missing),
                             "--probe-port", "-1")
    line = error_line(err)
    assert code == 2, err
    assert str(missing) in line


async def test_run_with_an_unknown_context_lists_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "op.py").write_text(OPERATOR)
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", f"{tmp_path / 'op.py'}:setup", "--kubeconfig",
                                 kubeconfig, "--context", "prod", "--probe-port", "-1")
    line = error_line(err)
    assert code == 2, err
    assert "context 'prod' is not defined" in line and "watchkeeper-sim" in line


async def test_run_on_a_busy_probe_port_says_which_port_and_the_flag(
    tmp_path: Path, busy_port: int
) -> None:
    (tmp_path / "op.py").write_text(OPERATOR)
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", f"{tmp_path / 'op.py'}:setup", "--kubeconfig",
                                 kubeconfig, "--probe-host", "127.0.0.1",
                                 "--probe-port", str(busy_port))
    line = error_line(err)
    assert code == 2, err
    assert f"cannot serve probes and metrics on 127.0.0.1:{busy_port}" in line
    assert "already in use" in line and "--probe-port" in line


async def test_run_imports_a_module_from_the_current_directory(tmp_path: Path) -> None:
    """`run mymod:setup` finds ./mymod.py as `python -m` would, also through the installed
    script (whose own directory, not the cwd, is first on sys.path)."""
    (tmp_path / "wk_cwd_operator.py").write_text(
        OPERATOR + "\n\ndef not_an_operator(client):\n    return 'hello'\n"
    )
    bindir = tmp_path / "bin"
    bindir.mkdir()
    launcher = bindir / "watchkeeper"
    launcher.write_text("import sys\nfrom watchkeeper.cli import main\nsys.exit(main())\n")
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", "wk_cwd_operator:not_an_operator", "--kubeconfig",
                                 kubeconfig, "--probe-port", "-1", cwd=tmp_path,
                                 launcher=launcher)
    line = error_line(err)
    # imported and called: the complaint is about what setup returned, not the import
    assert "wk_cwd_operator:not_an_operator must return a watchkeeper.Operator, not str" in line
    assert code == 2, err


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_run_loop_picks_the_event_loop_the_operator_runs_on(
    tmp_path: Path, loop: str
) -> None:
    """`run --loop uvloop` (the fast extra) runs setup and the operator on uvloop's loop."""
    seen = tmp_path / "loop.txt"
    (tmp_path / "op.py").write_text(
        "import asyncio\n\nasync def setup(client):\n"
        f"    open({str(seen)!r}, 'w').write(type(asyncio.get_running_loop()).__module__)\n"
        "    return 'not an operator'\n"
    )
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", f"{tmp_path / 'op.py'}:setup", "--kubeconfig",
                                 kubeconfig, "--probe-port", "-1", "--loop", loop)
    assert code == 2 and "must return a watchkeeper.Operator" in error_line(err), err
    assert seen.read_text().split(".")[0] == loop


async def test_run_loop_uvloop_without_uvloop_says_which_extra(tmp_path: Path) -> None:
    """Without the fast extra, `run --loop uvloop` is one `error:` line naming it, exit 2,
    before anything connects (here uvloop cannot be imported, as if not installed)."""
    (tmp_path / "op.py").write_text("async def setup(client):\n    raise SystemExit(99)\n")
    launcher = tmp_path / "watchkeeper"
    launcher.write_text("import sys\n"
                        "sys.modules['uvloop'] = None  # as if not installed\n"
                        "from watchkeeper.cli import main\nsys.exit(main())\n")
    code, _, err = await cli("run", f"{tmp_path / 'op.py'}:setup", "--kubeconfig",
                             str(tmp_path / "no-kubeconfig"), "--probe-port", "-1",
                             "--loop", "uvloop", launcher=launcher)
    assert error_line(err) == "error: --loop uvloop needs uvloop: pip install 'watchkeeper[fast]'"
    assert code == 2, err


async def test_status_accepts_host_port_without_a_scheme() -> None:
    probes = HealthServer("127.0.0.1", 0)
    await probes.start()
    try:
        code, out, err = await cli("status", f"127.0.0.1:{probes.port}")
    finally:
        await probes.stop()
    assert code == 0, out + err
    assert "ready" in out and "cannot read" not in out


# -- errors only the caller can fix (issue 10 item 18; needs the watcher to raise them) ------


async def test_watch_exits_at_once_on_a_malformed_selector(tmp_path: Path) -> None:
    """A 400 no retry can fix ends `watch` within seconds (not after --max-unhealthy, 300 s)
    with exit code 3 and the server's reason. Needs the watcher to raise BadRequest at once
    and `BadRequest.retriable = False` (branch h-watcher)."""
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("watch", "configmaps", "-n", "default", "--kubeconfig",
                                 kubeconfig, "-l", "app in (web", timeout=15)
    line = error_line(err)
    assert code == 3, err
    assert "rejected" in line and "400 BadRequest" in line and "unable to parse" in line


async def test_run_exits_at_once_when_the_server_rejects_a_request(tmp_path: Path) -> None:
    """The operator's own request gets a 400: `run` ends with exit code 3 and one line.
    Needs `BadRequest.retriable = False` (branch h-watcher)."""
    (tmp_path / "op.py").write_text(
        OPERATOR + "\n\nasync def bad_selector(client):\n"
        "    await client.api('configmaps', namespace='default').list(label_selector='a in (')\n"
        "    return setup(client)\n"
    )
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", f"{tmp_path / 'op.py'}:bad_selector", "--kubeconfig",
                                 kubeconfig, "--probe-port", "-1", timeout=15)
    line = error_line(err)
    assert code == 3, err
    assert "rejected" in line and "400 BadRequest" in line


async def test_run_exits_at_once_when_a_controller_watch_is_rejected(tmp_path: Path) -> None:
    """A controller whose watch has a malformed selector: `run` ends within seconds with
    exit code 3. Needs the watcher to raise BadRequest at once (branch h-watcher) and the
    controller to end `run()` with that failure instead of losing its task (h-supervise)."""
    (tmp_path / "op.py").write_text(
        OPERATOR + "\n\ndef bad_watch(client):\n"
        "    api = client.api('configmaps', namespace='default')\n"
        "    config = wk.WatchConfig(label_selector='app in (web')\n"
        "    return wk.Operator(wk.Controller(api, watch_config=config), reconcile)\n"
    )
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", f"{tmp_path / 'op.py'}:bad_watch", "--kubeconfig",
                                 kubeconfig, "--probe-port", "-1", timeout=20)
    line = error_line(err)
    assert code == 3, err
    assert "rejected" in line and "400 BadRequest" in line


def test_caller_errors_are_found_through_causes_and_groups() -> None:
    """The CLI finds an error only the caller can fix however the runtime wraps it."""
    from watchkeeper.cli import caller_error

    class Rejected(watchkeeper.BadRequest):
        retriable = False  # what h-watcher sets on BadRequest and Invalid

    rejected = Rejected("unable to parse requirement", code=400, reason="BadRequest")
    wrapped = watchkeeper.ControllerUnhealthy("trigger 'configmaps' failed", "configmaps")
    wrapped.__cause__ = rejected
    assert caller_error(wrapped) is rejected
    assert caller_error(ExceptionGroup("tasks", [ValueError("x"), wrapped])) is rejected
    retried = watchkeeper.ServerError("down", code=503)
    assert caller_error(retried) is None  # retriable (the default): not the caller's fault
    assert caller_error(watchkeeper.WatcherUnhealthy("x")) is None


# -- the first hour: a TARGET that is not an operator (issue 23 item 7) ------------------


@pytest.mark.parametrize(("attr", "source", "expected"), [
    ("NAME", 'NAME = "configmaps"\n', "op:NAME is a str, not a function that takes a Client"),
    ("two", "def two(client, extra):\n    pass\n",
     "op:two(client, extra) cannot be called with one argument (the Client)"),
    ("none", "def none():\n    pass\n", "op:none() cannot be called with one argument"),
    ("missing", "", "'op' has no attribute 'missing'"),
])
async def test_run_rejects_a_target_that_is_not_an_operator(
    tmp_path: Path, attr: str, source: str, expected: str,
) -> None:
    """One `error:` line naming the target and what it should be, exit 2, no traceback
    (before: a TypeError traceback from calling a str or a two-argument function)."""
    (tmp_path / "op.py").write_text(OPERATOR + "\n" + source)
    async with ApiServer() as srv:
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        code, _, err = await cli("run", f"op:{attr}", "--kubeconfig", kubeconfig,
                                 "--probe-port", "-1", cwd=tmp_path)
    line = error_line(err)
    assert code == 2, err
    assert expected in line, line


async def test_status_errors_start_with_error(tmp_path: Path) -> None:
    """`watchkeeper status` of a port nobody answers on: one `error:` line on stderr, exit 2
    (before: a red "cannot read" line on stdout)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        code, out, err = await cli("status", f"127.0.0.1:{port}")
    line = error_line(err)
    assert code == 2, out + err
    assert line.startswith(f"error: cannot read http://127.0.0.1:{port}/readyz?verbose")
    assert out == ""
