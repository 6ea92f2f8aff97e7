"""Warnings the API server sends in ``Warning`` response headers: a deprecated API version,
an unknown field dropped from a write, a label that will stop being valid.

The request succeeded, so nothing fails; a controller that drops them learns that its API
version is gone only on the day it is removed. client-go prints them; we log each distinct
text once per client (a watcher that re-lists every few minutes must not repeat the same
line forever) and let the user replace that with their own handler.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable

log = logging.getLogger("watchkeeper.client")

WarningHandler = Callable[[str], None]
"""Called with each warning's text (unquoted), once per warning per response."""

# RFC 7234 warning-value: warn-code SP warn-agent SP warn-text [SP warn-date]. The API server
# sends code 299 with agent "-"; like client-go, other codes are not the server's and ignored.
_WARNING = re.compile(r'(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"(?:\s+"[^"]*")?\s*,?\s*')


def parse_warnings(values: Iterable[str]) -> list[str]:
    """The texts of the code-299 warnings in ``values`` (each a ``Warning`` header's value,
    which may hold several comma-separated warnings), in order."""
    texts: list[str] = []
    for value in values:
        for code, _agent, text in _WARNING.findall(value):
            if code == "299":
                texts.append(re.sub(r"\\(.)", r"\1", text))
    return texts


class LogOnce:
    """The default handler: one WARNING log line per distinct text. Remembers the newest
    ``memory`` texts, so a client that meets endless distinct warnings stays bounded."""

    def __init__(self, memory: int = 512) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._memory = memory

    def __call__(self, text: str) -> None:
        if text in self._seen:
            self._seen.move_to_end(text)
            return
        self._seen[text] = None
        if len(self._seen) > self._memory:
            self._seen.popitem(last=False)
        log.warning("API server warning: %s", text)
