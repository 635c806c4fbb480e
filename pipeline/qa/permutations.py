"""``numpy.random.default_rng(seed).permutation(n)`` for a million seeds at once, bit for bit.

Letter balancing orders each question's distractors with a generator seeded
by (seed, question id). Seeding a ``Generator`` costs ~20 µs (a
``SeedSequence``, then PCG64), which for a benchmark of a million
multiple-choice questions is most of the dataset-wide step. The same
arithmetic is done here on arrays: ``SeedSequence`` pool mixing and state
generation (32-bit words), PCG64 seeding and stepping (128-bit state as two
64-bit halves), its 32-bit output buffering and the bounded-interval
rejection of ``Generator.shuffle``. ``tests/test_qa_finalize.py`` compares it
with numpy over many seeds and sizes; any seed above 64 bits or size beyond
2**32 goes to numpy itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_M32 = np.uint64(0xFFFFFFFF)
# numpy.random.SeedSequence constants
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_POOL = 4
# PCG64's default 128-bit multiplier, high and low halves
_MUL_HI, _MUL_LO = np.uint64(2549297995355413924), np.uint64(4865540595714422341)


def _u32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32)


def _hashmix(value: np.ndarray, hash_const: list[int]) -> np.ndarray:
    value = _u32(value) ^ np.uint32(hash_const[0])
    hash_const[0] = (hash_const[0] * _MULT_A) & 0xFFFFFFFF
    value = value * np.uint32(hash_const[0])
    return value ^ (value >> np.uint32(16))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    result = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
    return result ^ (result >> np.uint32(16))


def _pool(words: list[np.ndarray]) -> list[np.ndarray]:
    """SeedSequence.mix_entropy for entropy of len(words) <= pool size words (the same count for every row)."""
    hash_const = [_INIT_A]
    zeros = np.zeros_like(words[0])
    mixer = [_hashmix(words[i] if i < len(words) else zeros, hash_const) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                mixer[dst] = _mix(mixer[dst], _hashmix(mixer[src], hash_const))
    return mixer


def _state_words(pool: list[np.ndarray], n_words: int) -> list[np.ndarray]:
    """SeedSequence.generate_state(n_words, uint32)."""
    hash_const = _INIT_B
    out = []
    for i in range(n_words):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & 0xFFFFFFFF
        value = value * np.uint32(hash_const)
        out.append(value ^ (value >> np.uint32(16)))
    return out


def _mul64(a: np.ndarray, b: np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """Full 128-bit product of uint64 arrays ``a`` and scalar ``b``: (high, low)."""
    a0, a1 = a & _M32, a >> np.uint64(32)
    b0, b1 = b & _M32, b >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & _M32) + (p10 & _M32)
    low = (mid << np.uint64(32)) | (p00 & _M32)
    high = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    return high, low


def _step(hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """state = state * MULT + inc (mod 2**128)."""
    high, low = _mul64(lo, _MUL_LO)
    high = high + lo * _MUL_HI + hi * _MUL_LO
    new_lo = low + inc_lo
    carry = (new_lo < low).astype(np.uint64)
    return high + inc_hi + carry, new_lo


def _output(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """XSL-RR: rotate (high ^ low) right by the top six bits of the state."""
    x, rot = hi ^ lo, hi >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


class _Streams:
    """One PCG64 stream per seed, stepped only where asked."""

    def __init__(self, seeds: np.ndarray, two_words: bool):
        words = [_u32(seeds & _M32)] + ([_u32(seeds >> np.uint64(32))] if two_words else [])
        state = _state_words(_pool(words), 8)
        pairs = [(state[2 * k].astype(np.uint64) | (state[2 * k + 1].astype(np.uint64) << np.uint64(32))) for k in range(4)]
        seed_hi, seed_lo, seq_hi, seq_lo = pairs
        self.inc_hi = (seq_hi << np.uint64(1)) | (seq_lo >> np.uint64(63))
        self.inc_lo = (seq_lo << np.uint64(1)) | np.uint64(1)
        zero = np.zeros_like(seeds)
        hi, lo = _step(zero, zero, self.inc_hi, self.inc_lo)
        lo2 = lo + seed_lo
        hi = hi + seed_hi + (lo2 < lo).astype(np.uint64)
        self.hi, self.lo = _step(hi, lo2, self.inc_hi, self.inc_lo)
        self.has32 = np.zeros(len(seeds), dtype=bool)
        self.buffered = np.zeros(len(seeds), dtype=np.uint64)

    def next32(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), dtype=np.uint64)
        buffered = self.has32[rows]
        out[buffered] = self.buffered[rows[buffered]]
        self.has32[rows[buffered]] = False
        fresh = rows[~buffered]
        hi, lo = _step(self.hi[fresh], self.lo[fresh], self.inc_hi[fresh], self.inc_lo[fresh])
        self.hi[fresh], self.lo[fresh] = hi, lo
        value = _output(hi, lo)
        out[~buffered] = value & _M32
        self.buffered[fresh] = value >> np.uint64(32)
        self.has32[fresh] = True
        return out


def _interval(streams: _Streams, rows: np.ndarray, bound: int) -> np.ndarray:
    """Generator's random_interval(bound) for each row: masked 32-bit draws, rejected above ``bound``."""
    mask = (1 << bound.bit_length()) - 1
    out = np.empty(len(rows), dtype=np.uint64)
    pending = np.arange(len(rows))
    while len(pending):
        value = streams.next32(rows[pending]) & np.uint64(mask)
        ok = value <= np.uint64(bound)
        out[pending[ok]] = value[ok]
        pending = pending[~ok]
    return out


def seeded_permutations(seeds: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """``[list(np.random.default_rng(s).permutation(n)) for s, n in zip(seeds, sizes)]``, vectorised."""
    sizes = [int(n) for n in sizes]
    result: list[list[int]] = [list(range(n)) for n in sizes]
    big = [i for i, (s, n) in enumerate(zip(seeds, sizes)) if not 0 <= s < 1 << 64 or n > 1 << 32]
    for i in big:
        result[i] = [int(v) for v in np.random.default_rng(seeds[i]).permutation(sizes[i])]
    skip = set(big)
    for two_words in (False, True):
        chosen = [i for i, (s, n) in enumerate(zip(seeds, sizes))
                  if i not in skip and n > 1 and (s >= 1 << 32) == two_words]
        if not chosen:
            continue
        streams = _Streams(np.array([seeds[i] for i in chosen], dtype=np.uint64), two_words)
        n = np.array([sizes[i] for i in chosen])
        arrays = np.full((len(chosen), int(n.max())), -1, dtype=np.int64)
        for k in range(arrays.shape[1]):
            arrays[n > k, k] = k
        # Fisher-Yates from the last element down, all rows of a size in step.
        for i in range(int(n.max()) - 1, 0, -1):
            rows = np.flatnonzero(n > i)
            j = _interval(streams, rows, i).astype(np.int64)
            swapped = arrays[rows, j]
            arrays[rows, j] = arrays[rows, i]
            arrays[rows, i] = swapped
        for row, index in enumerate(chosen):
            result[index] = arrays[row, : sizes[index]].tolist()
    return result
