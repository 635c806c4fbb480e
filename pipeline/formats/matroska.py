"""Make a Matroska file written by FFmpeg (through OpenCV) byte-identical across runs.

FFmpeg's Matroska muxer draws a random ``SegmentUID`` and ``TrackUID`` (and the
``TagTrackUID`` that points at the track) for every file, and protects each
top-level element with a CRC-32; OpenCV offers no way to set the muxer's
``bitexact`` flag. So ``scan2qa synth`` (same seed, same files) rewrites those
identifiers in place with fixed values of the same length and recomputes the
CRC-32 of every top-level element. Nothing moves, so every offset in
``SeekHead`` and ``Cues`` stays valid.
"""

from __future__ import annotations

import zlib
from pathlib import Path

EBML_HEADER = 0x1A45DFA3
SEGMENT = 0x18538067
CRC32 = 0xBF
# Master elements on the way to the identifiers.
INFO, TRACKS, TRACK_ENTRY, TAGS, TAG, TARGETS = 0x1549A966, 0x1654AE6B, 0xAE, 0x1254C367, 0x7373, 0x63C0
SEGMENT_UID, TRACK_UID, TAG_TRACK_UID = 0x73A4, 0x73C5, 0x63C5
DESCEND = {INFO, TRACKS, TRACK_ENTRY, TAGS, TAG, TARGETS}


class MatroskaError(ValueError):
    pass


def _vint(buf: bytes | bytearray, pos: int, keep_marker: bool) -> tuple[int, int]:
    """(value, byte length) of the EBML variable-size integer at ``pos``."""
    if pos >= len(buf):
        raise MatroskaError(f"truncated at byte {pos}")
    first = buf[pos]
    length = 1
    while length <= 8 and not first & (0x80 >> (length - 1)):
        length += 1
    if length > 8 or pos + length > len(buf):
        raise MatroskaError(f"bad element header at byte {pos}")
    value = first if keep_marker else first & ((0x80 >> (length - 1)) - 1)
    for i in range(1, length):
        value = (value << 8) | buf[pos + i]
    return value, length


def _elements(buf: bytearray, start: int, end: int):
    """(id, element start, data start, data end) of the elements between ``start`` and ``end``."""
    pos = start
    while pos < end:
        element_id, id_len = _vint(buf, pos, True)
        size, size_len = _vint(buf, pos + id_len, False)
        data = pos + id_len + size_len
        unknown = size == (1 << (7 * size_len)) - 1
        stop = end if unknown else data + size
        if stop > end:
            raise MatroskaError(f"element {element_id:#x} at byte {pos} runs past its parent")
        yield element_id, pos, data, stop
        pos = stop


def _fix_identifiers(buf: bytearray, start: int, end: int, uid: bytes) -> None:
    for element_id, _, data, stop in _elements(buf, start, end):
        if element_id in DESCEND:
            _fix_identifiers(buf, data, stop, uid)
        elif element_id == SEGMENT_UID:
            buf[data:stop] = (uid * 2)[: stop - data]
        elif element_id in (TRACK_UID, TAG_TRACK_UID):
            buf[data:stop] = (1).to_bytes(stop - data, "big")  # the only track is track 1


def make_deterministic(path, uid: bytes) -> None:
    """Rewrite ``path`` in place: fixed segment UID (from ``uid``), track UID 1, CRC-32s recomputed."""
    path = Path(path)
    buf = bytearray(path.read_bytes())
    segments = [e for e in _elements(buf, 0, len(buf)) if e[0] == SEGMENT]
    if not buf or _vint(buf, 0, True)[0] != EBML_HEADER or not segments:
        raise MatroskaError(f"{path.name}: not a Matroska file")
    for _, _, seg_data, seg_end in segments:
        children = list(_elements(buf, seg_data, seg_end))
        for element_id, _, data, stop in children:
            if element_id in DESCEND:
                _fix_identifiers(buf, data, stop, uid)
        for _, _, data, stop in children:
            # A protected element starts with its CRC-32 child: ID 0xBF, size 4 (0x84), over the rest of the element.
            if stop - data >= 6 and buf[data] == CRC32 and buf[data + 1] == 0x84:
                buf[data + 2 : data + 6] = zlib.crc32(bytes(buf[data + 6 : stop])).to_bytes(4, "little")
    path.write_bytes(bytes(buf))
