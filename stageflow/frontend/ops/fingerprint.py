"""FarmHash's ``Fingerprint64`` (the ``farmhashna`` 64-bit hash with its fixed seed), the
string hash TensorFlow buckets with (`sf.strings.to_hash_bucket_fast`).

Written after Google's published FarmHash algorithm in plain Python integers, masked to
64 bits, so that the buckets are the ones TensorFlow computes for the same bytes on any
machine: a fingerprint is a stable value, never Python's randomized ``hash``.
"""

from __future__ import annotations

__all__ = ["fingerprint64"]

_MASK = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F


def _fetch64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _fetch32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def _rotate(value: int, shift: int) -> int:
    return ((value >> shift) | (value << (64 - shift))) & _MASK if shift else value


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _hash16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _MASK
    a ^= a >> 47
    b = ((v ^ a) * mul) & _MASK
    b ^= b >> 47
    return (b * mul) & _MASK


def _hash0to16(data: bytes) -> int:
    size = len(data)
    if size >= 8:
        mul = _K2 + size * 2
        a = (_fetch64(data, 0) + _K2) & _MASK
        b = _fetch64(data, size - 8)
        c = (_rotate(b, 37) * mul + a) & _MASK
        d = ((_rotate(a, 25) + b) * mul) & _MASK
        return _hash16(c, d, mul)
    if size >= 4:
        mul = _K2 + size * 2
        return _hash16(size + (_fetch32(data, 0) << 3), _fetch32(data, size - 4), mul)
    if size:
        y = (data[0] + (data[size >> 1] << 8)) & 0xFFFFFFFF
        z = (size + (data[size - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _MASK) * _K2) & _MASK
    return _K2


def _hash17to32(data: bytes) -> int:
    size = len(data)
    mul = _K2 + size * 2
    a = (_fetch64(data, 0) * _K1) & _MASK
    b = _fetch64(data, 8)
    c = (_fetch64(data, size - 8) * mul) & _MASK
    d = (_fetch64(data, size - 16) * _K2) & _MASK
    return _hash16((_rotate((a + b) & _MASK, 43) + _rotate(c, 30) + d) & _MASK,
                   (a + _rotate((b + _K2) & _MASK, 18) + c) & _MASK, mul)


def _hash33to64(data: bytes) -> int:
    size = len(data)
    mul = _K2 + size * 2
    a = (_fetch64(data, 0) * _K2) & _MASK
    b = _fetch64(data, 8)
    c = (_fetch64(data, size - 8) * mul) & _MASK
    d = (_fetch64(data, size - 16) * _K2) & _MASK
    y = (_rotate((a + b) & _MASK, 43) + _rotate(c, 30) + d) & _MASK
    z = _hash16(y, (a + _rotate((b + _K2) & _MASK, 18) + c) & _MASK, mul)
    e = (_fetch64(data, 16) * mul) & _MASK
    f = _fetch64(data, 24)
    g = ((y + _fetch64(data, size - 32)) * mul) & _MASK
    h = ((z + _fetch64(data, size - 24)) * mul) & _MASK
    return _hash16((_rotate((e + f) & _MASK, 43) + _rotate(g, 30) + h) & _MASK,
                   (e + _rotate((f + a) & _MASK, 18) + g) & _MASK, mul)


def _weak32(data: bytes, at: int, a: int, b: int) -> tuple[int, int]:
    """FarmHash's ``WeakHashLen32WithSeeds`` of the 32 bytes at `at`."""
    w, x, y, z = (_fetch64(data, at + 8 * i) for i in range(4))
    a = (a + w) & _MASK
    b = _rotate((b + a + z) & _MASK, 21)
    c = a
    a = (a + x + y) & _MASK
    b = (b + _rotate(a, 44)) & _MASK
    return (a + z) & _MASK, (b + c) & _MASK


def fingerprint64(data: bytes) -> int:
    """The unsigned 64-bit FarmHash fingerprint of `data` (``farmhash::Fingerprint64``).

    >>> fingerprint64(b"")
    11160318154034397263
    """
    size = len(data)
    if size <= 16:
        return _hash0to16(data)
    if size <= 32:
        return _hash17to32(data)
    if size <= 64:
        return _hash33to64(data)
    seed = 81
    y = (seed * _K1 + 113) & _MASK
    z = (_shift_mix((y * _K2 + 113) & _MASK) * _K2) & _MASK
    v0 = v1 = w0 = w1 = 0
    x = (seed * _K2 + _fetch64(data, 0)) & _MASK
    end = ((size - 1) // 64) * 64
    last64 = end + ((size - 1) & 63) - 63
    at = 0
    while True:
        x = (_rotate((x + y + v0 + _fetch64(data, at + 8)) & _MASK, 37) * _K1) & _MASK
        y = (_rotate((y + v1 + _fetch64(data, at + 48)) & _MASK, 42) * _K1) & _MASK
        x ^= w1
        y = (y + v0 + _fetch64(data, at + 40)) & _MASK
        z = (_rotate((z + w0) & _MASK, 33) * _K1) & _MASK
        v0, v1 = _weak32(data, at, (v1 * _K1) & _MASK, (x + w0) & _MASK)
        w0, w1 = _weak32(data, at + 32, (z + w1) & _MASK, (y + _fetch64(data, at + 16)) & _MASK)
        z, x = x, z
        at += 64
        if at == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    at = last64
    w0 = (w0 + ((size - 1) & 63)) & _MASK
    v0 = (v0 + w0) & _MASK
    w0 = (w0 + v0) & _MASK
    x = (_rotate((x + y + v0 + _fetch64(data, at + 8)) & _MASK, 37) * mul) & _MASK
    y = (_rotate((y + v1 + _fetch64(data, at + 48)) & _MASK, 42) * mul) & _MASK
    x ^= (w1 * 9) & _MASK
    y = (y + v0 * 9 + _fetch64(data, at + 40)) & _MASK
    z = (_rotate((z + w0) & _MASK, 33) * mul) & _MASK
    v0, v1 = _weak32(data, at, (v1 * mul) & _MASK, (x + w0) & _MASK)
    w0, w1 = _weak32(data, at + 32, (z + w1) & _MASK, (y + _fetch64(data, at + 16)) & _MASK)
    z, x = x, z
    return _hash16((_hash16(v0, w0, mul) + _shift_mix(y) * _K0 + z) & _MASK,
                   (_hash16(v1, w1, mul) + x) & _MASK, mul)
