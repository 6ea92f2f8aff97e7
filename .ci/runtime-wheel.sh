#!/usr/bin/env bash
# The runtime wheel carries no test-only dependency (issue 12): build both wheels, install ONLY
# the runtime's into a throw-away venv (its dependencies come from the package index), and show
# that `import watchkeeper` and `watchkeeper --help` work there without trustme, cryptography
# or the simulator, that `watchkeeper sim` then says in one line how to get it, and that the
# simulator's wheel declares what it needs. PY: the python that builds (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
work=$(mktemp -d /tmp/wk-runtime-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$SECONDS

"$PY" -m pip wheel -q --no-deps -w "$work/dist" . ./sim
runtime=$(ls "$work"/dist/watchkeeper-[0-9]*.whl)
simwheel=$(ls "$work"/dist/watchkeeper_sim-[0-9]*.whl)
echo "built: $(basename "$runtime") $(basename "$simwheel")"

"$PY" -m venv "$work/venv"
bin="$work/venv/bin"
"$bin/pip" install -q "$runtime"
cd "$work"  # nothing of the checkout on sys.path from here on

installed=$("$bin/pip" list --format=freeze)
echo "installed: $(echo "$installed" | tr '\n' ' ')"
for forbidden in trustme cryptography uvloop watchkeeper-sim watchkeeper_sim; do
  if echo "$installed" | grep -qi "^${forbidden}=="; then
    echo "FAIL: the runtime wheel pulled in $forbidden" >&2
    exit 1
  fi
done

"$bin/python" -c "import watchkeeper, sys; print('import watchkeeper', watchkeeper.__version__, 'from', watchkeeper.__file__)"
# the watch stream's C part is in the wheel (built by hatch_build.py) and is what runs
"$bin/python" -c "from watchkeeper.client import _fast; print('C speedups:', _fast.speedups)"
if [ "${WATCHKEEPER_REQUIRE_SPEEDUPS:-0}" != "0" ]; then
  "$bin/python" -c "from watchkeeper.client import _fast; assert _fast.ACTIVE, 'no C speedups in the runtime wheel'"
fi
if "$bin/python" -c "import watchkeeper_sim" 2>/dev/null; then
  echo "FAIL: watchkeeper_sim is importable from the runtime wheel alone" >&2
  exit 1
fi
"$bin/watchkeeper" --help > "$work/help.txt"
head -n 3 "$work/help.txt"
grep -qE "^ +sim +" "$work/help.txt" || { echo "FAIL: --help does not list sim" >&2; exit 1; }

set +e
"$bin/watchkeeper" sim --port 0 > "$work/sim.out" 2> "$work/sim.err"
code=$?
set -e
cat "$work/sim.err"
if [ "$code" -ne 2 ] || ! grep -q "pip install watchkeeper-sim" "$work/sim.err" \
    || [ "$(wc -l < "$work/sim.err")" -ne 1 ]; then
  echo "FAIL: 'watchkeeper sim' without the simulator: exit $code, want one line and exit 2" >&2
  exit 1
fi

# webhook certificates need the `webhooks` extra: the package imports without it, and a
# CertificateManager says in its error which extra to install
"$bin/python" - <<'PY'
import sys
import watchkeeper.webhooks as wh
assert "cryptography" not in sys.modules, "importing watchkeeper.webhooks loaded cryptography"
try:
    wh.CertificateManager(None, wh.WebhookCerts("svc", "ns"))  # type: ignore[arg-type]
except wh.MissingExtra as exc:
    assert "pip install 'watchkeeper[webhooks]'" in str(exc), exc
    print("webhooks without cryptography:", exc)
else:
    raise SystemExit("FAIL: a CertificateManager was built without cryptography")
PY

"$bin/python" - "$simwheel" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    needs = [l.split(":", 1)[1].strip() for l in z.read(meta).decode().splitlines()
             if l.startswith("Requires-Dist:")]
    names = {n.removesuffix(".py").replace("/", ".") for n in z.namelist() if n.endswith(".py")}
    eps = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")))
missing = [d for d in ("watchkeeper", "trustme", "cryptography")
           if not any(n.split(">")[0].split("=")[0].split("<")[0].strip() == d for n in needs)]
assert not missing, f"the simulator wheel does not declare {missing}: {needs}"
assert "watchkeeper_sim.server" in names and "watchkeeper_sim.cli" in names, sorted(names)[:5]
# the runtime's CLI finds `sim` and `demo` only through these; pytest finds the fixtures
for line in ("[watchkeeper.commands]", "sim = watchkeeper_sim.cli:sim",
             "demo = watchkeeper_sim.cli:demo", "[pytest11]"):
    assert line in eps.decode().splitlines(), f"the simulator wheel lacks {line!r}: {eps!r}"
print(f"simulator wheel: {len(names)} modules, requires {', '.join(needs)}")
PY
echo "runtime wheel check passed in $((SECONDS - start)) s"
