"""PNG encoding of an 8-bit image, with zlib: what TensorBoard's image summaries hold.

TensorBoard shows an image summary's PNG bytes as they are; no imaging library is needed to
write one: a signature, a header chunk, the rows (each behind filter byte 0, "none")
deflated into one data chunk, and an end chunk, each chunk closed by its CRC-32.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG's colour type per channel count: grey, grey and alpha, RGB, RGBA.
_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data)))


def encode_png(image: np.ndarray) -> bytes:
    """The PNG file of `image`, uint8 of shape [height, width, channels] (1 to 4)."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in _COLOUR_TYPES:
        raise ValueError(f"a PNG is encoded from uint8 [height, width, channels] with 1 to 4 "
                         f"channels, got {image.dtype} of shape {image.shape}")
    height, width, channels = image.shape
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPES[channels], 0, 0, 0)
    rows = np.zeros((height, 1 + width * channels), np.uint8)  # column 0: filter "none"
    rows[:, 1:] = image.reshape(height, width * channels)
    return (_SIGNATURE + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + _chunk(b"IEND", b""))
