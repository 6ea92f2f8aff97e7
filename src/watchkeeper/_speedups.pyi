from collections.abc import Callable, Mapping
from typing import Any

def lazy_batch(
    data: bytes, decode: Callable[[bytes], Any], classes: Mapping[str, Any],
    counts: dict[str, int], strip: bool, piece_type: Callable[[bytes], Any], /,
) -> tuple[list[Any], Any, str] | None: ...
def whole_chunks(
    buf: bytearray, p: int, b: int, w: int, head: bytes, size: int, /,
) -> tuple[int, int, bytes, int]: ...
def hand_chunks(
    buf: bytearray, p: int, b: int, w: int, head: bytes, size: int, r: int, hand: int, /,
) -> tuple[bytes | None, int, int, bytes, int]: ...

class KeyField:
    def __init__(self, field: str, /) -> None: ...
    def __get__(self, obj: Any, owner: type | None = None, /) -> Any: ...
