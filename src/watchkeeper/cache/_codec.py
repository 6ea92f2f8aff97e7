"""Each cached object as compressed JSON: zstd with a dictionary trained on the store's own
objects (docs/decisions.md has the measurements that chose it over zlib's preset
dictionaries: the same sizes at a tenth of the compression CPU).

Objects of one resource share most of their bytes (keys, defaults, owners, images), which a
dictionary holds once: a 1.1 KB ConfigMap compresses to ~75 bytes with one, ~380 without.
The first ``train_after`` objects are compressed without a dictionary and kept as samples;
then a dictionary is trained from them and becomes the current one. Every blob names its
dictionary in its first byte (its *slot*), so a dictionary trained later (when the ratio
drifts: the objects changed shape) never makes an older blob unreadable; the owner of the
blobs re-encodes the dictionary-less ones after a training and tells ``prune`` which slots
are still in use.
"""

from __future__ import annotations

import logging

import zstandard

__all__ = ["Codec"]

log = logging.getLogger("watchkeeper.cache")

LEVEL = 1  # level 3: the same blobs for ConfigMaps, 4 % smaller for Pods, 5-25 % slower
MAX_SLOTS = 8  # live dictionaries; past that, no retraining until old ones are unused
DRIFT = 1.5  # retrain when a window compresses this much worse than the first one did
WINDOW = 2048  # objects per drift check
_FORMAT = zstandard.FORMAT_ZSTD1_MAGICLESS  # 4 bytes less per object: the slot says zstd


def _params() -> zstandard.ZstdCompressionParameters:
    return zstandard.ZstdCompressionParameters.from_level(
        LEVEL, format=_FORMAT, write_content_size=True, write_checksum=False,
        write_dict_id=False,
    )


class _Slot:
    """One dictionary (or none, slot 0) with its compressor and decompressor."""

    __slots__ = ("compress", "decompress", "ratio")

    def __init__(self, data: zstandard.ZstdCompressionDict | None, ratio: float) -> None:
        if data is None:
            self.compress = zstandard.ZstdCompressor(compression_params=_params()).compress
            self.decompress = zstandard.ZstdDecompressor(format=_FORMAT).decompress
        else:
            self.compress = zstandard.ZstdCompressor(
                dict_data=data, compression_params=_params()).compress
            self.decompress = zstandard.ZstdDecompressor(
                dict_data=data, format=_FORMAT).decompress
        self.ratio = ratio  # compressed / raw bytes, the first window after training


class Codec:
    """Compresses one store's objects (JSON bytes) into blobs and back."""

    def __init__(self, train_after: int = 256, dict_size: int = 64 * 1024,
                 window: int = WINDOW) -> None:
        self.train_after = train_after
        self.dict_size = dict_size
        self.window = window
        self._slots: list[_Slot | None] = [_Slot(None, 1.0)]
        self._current = 0
        self._samples: list[bytes] | None = []  # collecting for the next training
        self._window_raw = self._window_packed = self._window_n = 0
        self.trainings = 0  # dictionaries trained so far (the owner re-encodes after each)

    @property
    def current(self) -> int:
        """The slot new blobs are made with (0: no dictionary yet)."""
        return self._current

    def encode(self, raw: bytes, tag: bytes = b"") -> bytes:
        """``raw`` compressed, after its slot and ``tag`` (up to 255 bytes the owner reads
        back with ``tag()`` without decompressing: a Store keeps the resourceVersion there,
        which saves a string object per cached object)."""
        slot = self._current
        packed = self._slots[slot].compress(raw)  # type: ignore[union-attr]
        # A copy of the exact size: zstd's result keeps its worst-case allocation (RSS).
        blob = b"".join((bytes((slot, len(tag))), tag, packed))
        samples = self._samples
        if samples is not None:
            samples.append(raw)
            if len(samples) >= self.train_after:
                self._train(samples)
        elif slot:  # the drift window, written out: called for every object stored
            self._window_raw += len(raw)
            self._window_packed += len(packed)
            self._window_n += 1
            if self._window_n >= self.window:
                self._check_drift()
        return blob

    def decode(self, blob: bytes) -> bytes:
        slot = self._slots[blob[0]]
        assert slot is not None, "a blob outlived its dictionary"
        return slot.decompress(memoryview(blob)[2 + blob[1]:])

    @staticmethod
    def tag(blob: bytes) -> bytes:
        return blob[2:2 + blob[1]]

    def recode(self, blob: bytes) -> bytes:
        """``blob`` made again with the current dictionary."""
        return self.encode(self.decode(blob), self.tag(blob))

    def _check_drift(self) -> None:
        ratio = self._window_packed / max(self._window_raw, 1)
        current = self._slots[self._current]
        assert current is not None
        self._window_raw = self._window_packed = self._window_n = 0
        if not current.ratio:  # the first window after a training sets the bar
            current.ratio = ratio
        elif ratio > current.ratio * DRIFT:
            log.debug("cache compression drifted (%.3f against %.3f): retraining",
                      ratio, current.ratio)
            self._samples = []

    def _train(self, samples: list[bytes]) -> None:
        free = next((i for i in range(1, MAX_SLOTS + 1) if i >= len(self._slots)
                     or self._slots[i] is None), None)
        if free is None:
            self._samples = None  # every slot in use: keep the current dictionary
            return
        total = sum(map(len, samples))
        given: list[bytes | bytearray | memoryview[int]] = [*samples]
        try:
            # k and d fixed: the default searches for them, 4-7x slower (36-51 ms against
            # 5-11 ms for 256 ConfigMaps or Pods, a stall of the event loop) for no smaller
            # blobs on ConfigMaps and bigger ones on Pods (docs/decisions.md).
            data = zstandard.train_dictionary(
                max(1024, min(self.dict_size, total // 8)), given, level=LEVEL, k=1024, d=8)
        except zstandard.ZstdError:  # too few or too alike samples: collect more
            if len(samples) >= 16 * self.train_after:
                self._samples = None  # give up: these objects do without a dictionary
            return
        slot = _Slot(data, 0.0)  # its ratio: measured on the objects after its samples
        if free == len(self._slots):
            self._slots.append(slot)
        else:
            self._slots[free] = slot
        self._current = free
        self._samples = None
        self.trainings += 1

    def prune(self, used: set[int]) -> None:
        """Drop the dictionaries no blob in ``used`` slots needs any longer."""
        for i in range(1, len(self._slots)):
            if i != self._current and i not in used:
                self._slots[i] = None
