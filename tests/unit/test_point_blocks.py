"""A block of points (ingest.core.pointstore.Block) as it is stored: the short layout (int32
pks and steps when they fit, times as runs) reads back bit for bit, is never mistaken for the
plain layout of 32 bytes a point, and blocks stored in the plain layout still read."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.core.pointstore import Block


def plain(b: Block) -> bytes:
    """The layout blocks were stored in before the short one."""
    return (b.pk.astype("<i8").tobytes() + b.step.astype("<i8").tobytes()
            + b.time.astype("<f8").tobytes() + b.value.astype("<f8").tobytes())


def same(a: Block, b: Block) -> None:
    for name in ("pk", "step", "time", "value"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), name


def block(rng: np.random.Generator, n: int, *, wide: bool = False, runs: bool = True) -> Block:
    steps = np.repeat(np.arange(n // 8 + 1), 8)[:n] + (2**40 if wide else 0)
    pk = rng.integers(1, 400, n) + (2**33 if wide else 0)
    time = (1.7e9 + steps.astype(float)) if runs else rng.random(n)
    value = rng.normal(size=n)
    if n > 3:
        value[:3] = [np.nan, -0.0, np.inf]  # a tombstone, a negative zero: their bits kept
    return Block.of(pk, steps, time, value)


@pytest.mark.parametrize("seed", range(30))
def test_a_block_reads_back_as_it_was_written(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 2, 7, 64, 1000, 23_552]))
    b = block(rng, n, wide=seed % 3 == 1, runs=seed % 2 == 0)
    data = b.pack()
    assert len(data) != 32 * n  # never read as the plain layout
    same(Block.unpack(data, n), b)
    same(Block.unpack(memoryview(data), n), b)


def test_an_aggregation_pass_block_takes_about_half_the_bytes() -> None:
    rng = np.random.default_rng(1)
    steps, series = 64, 368  # a pass's write: every series at each of its steps, one time a step
    b = Block.of(np.tile(np.arange(1, series + 1), steps), np.repeat(np.arange(steps), series),
                 np.repeat(1.7e9 + np.arange(steps), series), rng.random(steps * series))
    assert len(b.pack()) < 0.55 * len(plain(b))
    same(Block.unpack(b.pack(), len(b)), b)


def test_no_size_is_mistaken_for_the_plain_layout() -> None:
    """The short layout pads itself off 32 * n bytes: every size of a growing block."""
    rng = np.random.default_rng(2)
    for n in range(0, 300):
        b = block(rng, n, runs=n % 2 == 0)
        data = b.pack()
        assert len(data) != 32 * n
        same(Block.unpack(data, n), b)


@pytest.mark.parametrize("n", [0, 1, 5, 4096])
def test_a_block_in_the_plain_layout_still_reads(n: int) -> None:
    b = block(np.random.default_rng(n), n, wide=n == 5)
    same(Block.unpack(plain(b), n), b)


def test_a_block_padded_off_the_plain_size_reads_back() -> None:
    """Blocks whose short layout would end on a multiple of 32 bytes carry a pad byte: found
    among random shapes (pks beyond int32 at times, runs of times of every length)."""
    rng = np.random.default_rng(0)
    padded = 0
    for i in range(3000):
        n = int(rng.integers(1, 300))
        k = int(rng.integers(1, n + 1))
        b = Block.of(rng.integers(1, 100, n) + (2**33 if i % 5 == 0 else 0),
                     rng.integers(0, 9, n), np.repeat(rng.random(k), n // k + 1)[:n],
                     rng.random(n))
        data = b.pack()
        assert len(data) != 32 * n
        if data[-1] == 1:
            padded += 1
            assert len(data) % 32 == 1
            same(Block.unpack(data, n), b)
    assert padded >= 5
