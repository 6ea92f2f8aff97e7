"""Without the `webhooks` extra: the runtime imports, the certificate manager says what to install.

A fresh interpreter in which ``cryptography`` cannot be imported (a ``None`` entry in
``sys.modules`` is how Python marks a module as absent); .ci/runtime-wheel.sh checks the same on
a venv where it is not installed at all.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["cryptography"] = None
import watchkeeper
import watchkeeper.webhooks as wh
try:
    wh.CertificateManager(None, wh.WebhookCerts("svc", "ns"))
except wh.MissingExtra as exc:
    print("ERROR:", exc)
"""


def test_the_runtime_imports_without_cryptography_and_the_manager_names_the_extra() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == (
        "ERROR: webhook certificates need the cryptography package: "
        "pip install 'watchkeeper[webhooks]'"), out.stderr


def test_importing_the_webhooks_package_does_not_load_cryptography() -> None:
    code = "import sys, watchkeeper, watchkeeper.webhooks; print('cryptography' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"
