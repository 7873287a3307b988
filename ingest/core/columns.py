"""Compact columnar storage of raw samples, and assembly of a step's samples for aggregation.

A stored batch is one msgpack map: float columns as raw float64 bytes, string columns
dictionary-encoded (unique values + int32 codes). Assembly concatenates every batch of a step
and sorts the samples into a canonical order, so aggregates do not depend on how samples were
split into messages or in which order those arrived.

Three shorter forms, for what trainers send most (a quarter of a typical batch's bytes, and
of what the database writes): a float column of one value for all (a step's `time`) is
`{"k": its 8 bytes}`; integer ids that count up, each repeated k times (sample ids 0, 1, 2…;
group ids 7, 7, 8, 8…), are `{"r": [first, k]}` instead of `{"i": …}`; a dictionary's codes are
one byte each (`"b"`) when it has at most 256 values, and absent when it has one. `unpack`
turns them back into the long forms, so every reader sees one layout; batches stored before
them read as they are.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, cast

import msgpack
import numpy as np

from ingest.core.samples import DISCARD_NAMES, StepSamples
from trainer_hooks.wire.protocol import NUMBER_COLUMNS as FLOAT_COLUMNS
from trainer_hooks.wire.protocol import STRING_COLUMNS, Samples

# The columns by kind, from the wire's sample column table (`trainer_hooks.wire.columns`):
# FLOAT_COLUMNS stored as raw float64, STRING_COLUMNS dictionary-encoded (ids that are all
# integers, which the wire allows, as int64).


def dictionary(s: Samples, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A string column of the message as (sorted unique values, codes): the validator's when
    it dictionary-encoded the column, else computed once and kept in `Samples.dictionaries`
    (np.unique sorts strings: not twice per message)."""
    got = s.dictionaries.get(name)
    if got is None:
        got = s.dictionaries[name] = np.unique(getattr(s, name), return_inverse=True)
    return got


class _Parts:
    """Where each step's samples lie in a message gathered into step order: part i is
    `starts[i]` to `ends[i]` (`sizes[i]` samples, at least one)."""

    def __init__(self, step: np.ndarray) -> None:
        self.starts = np.concatenate([[0], np.flatnonzero(step[1:] != step[:-1]) + 1])
        self.ends = np.concatenate([self.starts[1:], [step.size]])
        self.sizes = self.ends - self.starts
        self.steps = step[self.starts].tolist()
        self.bounds = list(zip(self.starts.tolist(), self.ends.tolist(), strict=True))

    def all_(self, same: np.ndarray) -> np.ndarray:
        """Per part, whether `same` (per sample) holds for all its samples."""
        return np.logical_and.reduceat(same, self.starts)

    def spread(self, per_part: np.ndarray) -> np.ndarray:
        """A value per part repeated for each of its samples."""
        return np.repeat(per_part, self.sizes)


def encode_steps(s: Samples) -> list[tuple[int, int, bytes]]:
    """(step, samples, blob) for every distinct step of a samples message, in step order; a
    step keeps the message's order (`step_slices`). Each column is converted and checked for
    its short form once for the whole message, its steps' parts being slices of that (the
    samples gathered into step order first when the message's steps go down): a message of
    many steps costs a fixed number of numpy calls and one small map per step."""
    step = s.step
    order = None
    if step.size > 1 and bool(np.any(step[1:] < step[:-1])):
        order = np.argsort(step, kind="stable")
        step = step[order]
    parts = _Parts(step)

    def take(col: np.ndarray) -> np.ndarray:
        return col if order is None else col[order]

    maps: list[dict[str, Any]] = [{"n": n} for n in parts.sizes.tolist()]
    for name in FLOAT_COLUMNS:
        col = getattr(s, name)
        if col is not None:
            for m, part in zip(maps, _float_parts(take(col), parts), strict=True):
                m[name] = part
    for name in STRING_COLUMNS:
        col = getattr(s, name)
        if col is None:
            continue
        if col.dtype.kind == "i":
            got = _int_parts(take(col), parts)
        else:
            uniques, codes = dictionary(s, name)
            got = _dictionary_parts(uniques, take(codes), parts)
        for m, part in zip(maps, got, strict=True):
            m[name] = part
    metrics = {k: _slices(np.ascontiguousarray(take(v), dtype="<f8"), parts)
               for k, v in s.metrics.items()}
    for i, m in enumerate(maps):
        m["metrics"] = {k: got[i] for k, got in metrics.items()}
    packer = _packer()
    return [(first, m["n"], packer.pack(m)) for first, m in zip(parts.steps, maps, strict=True)]


_LOCAL = threading.local()


def _packer() -> msgpack.Packer:
    """This thread's packer: a new one takes fresh memory for its buffer with every message,
    which cost more than packing it (measured: ~115 of ~425 µs for 8 steps of 512 samples)."""
    packer = getattr(_LOCAL, "packer", None)
    if packer is None:
        packer = _LOCAL.packer = msgpack.Packer(use_bin_type=True)
    return packer


def _slices(data: np.ndarray, parts: _Parts) -> list[memoryview]:
    """Each part's bytes of a contiguous column (views: msgpack packs them as bin)."""
    width = data.itemsize
    raw = memoryview(cast(Any, data)).cast("B")  # (numpy arrays are buffers; its stubs say not)
    return [raw[a * width:b * width] for a, b in parts.bounds]


def _float_parts(values: np.ndarray, parts: _Parts) -> list[Any]:
    """A float column's parts: each its float64 bytes, or `{"k": one value's}` when all its
    values (two or more) are that one, bit for bit (NaN and -0.0 kept as they are)."""
    data = np.ascontiguousarray(values, dtype="<f8")
    bits = data.view("<i8")
    one = (parts.all_(bits == parts.spread(bits[parts.starts])) & (parts.sizes > 1)).tolist()
    whole = _slices(data, parts)
    return [{"k": part[:8]} if k else part for part, k in zip(whole, one, strict=True)]


def _int_parts(values: np.ndarray, parts: _Parts) -> list[dict[str, Any]]:
    """Integer ids' parts: each `{"r": [first, k]}` when they are first, first… (k times),
    first + 1…, else `{"i": their int64 bytes}`."""
    v = np.ascontiguousarray(values, dtype="<i8")
    first, last, n = v[parts.starts], v[parts.ends - 1], parts.sizes
    span = last - first + 1  # (wraps only when last >= first fails or is ≥ 2**63 away: ≤ 0)
    ok = (n > 1) & (last >= first) & (span > 0) & (span <= n)
    span = np.where(ok, span, 1)
    ok &= n % span == 0
    k = n // span
    if ok.any():
        local = np.arange(v.size, dtype=np.int64) - parts.spread(parts.starts)
        if bool((k[ok] != 1).any()):  # (ids each once, sample ids: no division)
            local //= parts.spread(k)
        ok &= parts.all_(v == parts.spread(first) + local)
    whole = _slices(v, parts)
    return [{"r": [f, kk]} if yes else {"i": part} for part, yes, f, kk
            in zip(whole, ok.tolist(), first.tolist(), k.tolist(), strict=True)]


def _dictionary_parts(uniques: np.ndarray, codes: np.ndarray, parts: _Parts
                      ) -> list[dict[str, Any]]:
    """A dictionary-encoded column's parts: each `{"u": the values it uses, sorted}` with its
    samples' codes into them, one byte each (`"b"`) when it uses at most 256 values, four
    (`"c"`) when more, none when one."""
    k, p = uniques.size, parts.starts.size
    if k == 1:  # one value for all (a blank discard reason)
        return [{"u": uniques.tolist()} for _ in range(p)]
    part = parts.spread(np.arange(p))
    if p * k <= 4 * codes.size + 64 * p:  # a few values (an env, a reason): a table, no sort
        cell = part * k + codes
        present = np.zeros(p * k, dtype=bool)
        present[cell] = True
        # (each step using every value, as most do: the codes are the message's)
        local = codes if present.all() else (np.cumsum(present.reshape(p, k), axis=1)
                                              - 1).reshape(-1)[cell]
        used_part, used = np.divmod(np.flatnonzero(present), k)
    else:  # many (string ids): their distinct (part, code) pairs, sorted
        pairs, inverse = np.unique(part * k + codes, return_inverse=True)
        used_part, used = np.divmod(pairs, k)
        local = inverse.reshape(-1) - np.searchsorted(used_part, part)
    counts = np.bincount(used_part, minlength=p)
    names = uniques[used].tolist()
    cut = np.concatenate([[0], np.cumsum(counts)]).tolist()
    wide = _slices(local.astype("<i4"), parts) if bool((counts > 256).any()) else None
    narrow = _slices(local.astype(np.uint8), parts) if bool((counts > 1).any()) else None
    out: list[dict[str, Any]] = []
    for i, c in enumerate(counts.tolist()):
        got: dict[str, Any] = {"u": names[cut[i]:cut[i + 1]]}
        if c > 256:
            got["c"] = cast(list[memoryview], wide)[i]
        elif c > 1:
            got["b"] = cast(list[memoryview], narrow)[i]
        out.append(got)
    return out


def step_slices(step: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(step, indices of its samples) for every distinct step of a message, in step order; a
    step keeps the message's order. A stored batch holds its samples in this order
    (`encode_steps`), and so does their text (ingest.core.texts)."""
    order = np.argsort(step, kind="stable")  # sorted once and sliced: linear in the message
    parts = _Parts(step[order])
    return [(first, order[a:b]) for first, (a, b) in zip(parts.steps, parts.bounds, strict=True)]


def decode_batch(blob: bytes) -> dict[str, Any]:
    """A stored blob back to columns: float64 arrays and numpy string arrays."""
    raw = unpack(blob)
    out: dict[str, Any] = {"n": raw["n"]}
    for name in FLOAT_COLUMNS:
        if name in raw:
            out[name] = np.frombuffer(raw[name], dtype="<f8")
    for name in STRING_COLUMNS:
        if name in raw and "i" in raw[name]:
            out[name] = np.frombuffer(raw[name]["i"], dtype="<i8")
        elif name in raw:
            uniques = np.array(raw[name]["u"], dtype=str)
            out[name] = uniques[np.frombuffer(raw[name]["c"], dtype="<i4")]
    out["metrics"] = {k: np.frombuffer(v, dtype="<f8") for k, v in raw["metrics"].items()}
    return out


Raw = dict[str, Any]  # a stored batch as msgpack unpacks it (see `encode_steps`)


def unpack(blob: bytes) -> Raw:
    """A stored blob as its msgpack map, columns still bytes (what `assemble_steps` takes), the
    short forms (module docstring) in their long ones."""
    raw: Raw = msgpack.unpackb(bytes(blob), raw=False)
    n = raw["n"]
    for name in FLOAT_COLUMNS:
        col = raw.get(name)
        if isinstance(col, dict):
            raw[name] = col["k"] * n
    for name in STRING_COLUMNS:
        col = raw.get(name)
        if col is None:
            continue
        if "r" in col:
            first, k = col["r"]
            raw[name] = {"i": (first + np.arange(n, dtype="<i8") // k).tobytes()}
        elif "u" in col and "c" not in col:
            col["c"] = (np.frombuffer(col["b"], dtype=np.uint8).astype("<i4").tobytes()
                        if "b" in col else _zero_codes(n))
    return raw


@functools.lru_cache(maxsize=64)
def _nan_bytes(n: int) -> bytes:
    return np.full(n, np.nan, dtype="<f8").tobytes()


def float_column(raws: list[Raw], get: Callable[[Raw], bytes | None]) -> np.ndarray | None:
    """One float column over every batch (NaN for batches without it); None if none has it."""
    return _joined(raws, [get(r) for r in raws])


def _joined(raws: list[Raw], parts: list[bytes | None]) -> np.ndarray | None:
    """The batches' parts of one float column end to end (NaN for a batch without one)."""
    if None in parts:
        if all(p is None for p in parts):
            return None
        parts = [_nan_bytes(r["n"]) if p is None else p for r, p in zip(raws, parts, strict=True)]
    return np.frombuffer(b"".join(cast(list[bytes], parts)), dtype="<f8")


def _metric_column(raws: list[Raw], name: str) -> np.ndarray:
    """A sample metric over every batch (NaN where a batch lacks it); some batch has it."""
    column = _joined(raws, [r["metrics"].get(name) for r in raws])
    assert column is not None
    return column


@functools.lru_cache(maxsize=64)
def _zero_codes(n: int) -> bytes:
    return bytes(4 * n)


def _strings(raws: list[Raw], name: str) -> tuple[list[str], np.ndarray]:
    """A dictionary-encoded column over every batch: (the batches' unique values one after
    the other, each sample's index into them). A batch without the column has the value "";
    integer values become their decimal strings."""
    uniques: list[str] = []
    codes, offsets = [], []
    for r in raws:
        col = r.get(name)
        offsets.append(len(uniques))
        if col is None:
            uniques.append("")
            codes.append(_zero_codes(r["n"]))
        elif "i" in col:
            uniques.extend(str(x) for x in np.frombuffer(col["i"], dtype="<i8").tolist())
            codes.append(np.arange(r["n"], dtype="<i4").tobytes())
        else:
            uniques.extend(col["u"])
            codes.append(col["c"])
    index = np.frombuffer(b"".join(codes), dtype="<i4").astype(np.int64)
    return uniques, index + np.repeat(offsets, [r["n"] for r in raws])


def vocabulary(raws: list[Raw], name: str) -> tuple[list[str], np.ndarray]:
    """A string column of few values (env, reasons): its distinct values, sorted, and each
    sample's index into them."""
    uniques, index = _strings(raws, name)
    vocab = sorted(set(uniques))
    position = {v: i for i, v in enumerate(vocab)}
    return vocab, np.array([position[u] for u in uniques], dtype=np.int64)[index]


def _id_codes(raws: list[Raw], step_of_batch: np.ndarray, n_steps: int,
              name: str) -> np.ndarray:
    """Codes that order the ids of each step. Integer ids stay integers; if any batch of a step
    used strings, all of that step's become strings (so 7 and "7" are one id, as they are on
    the wire). Steps of the two kinds are coded apart: codes only compare within a step."""
    text = np.array([r[name].get("i") is None for r in raws], dtype=bool)
    stringy = np.zeros(n_steps, dtype=bool)
    stringy[step_of_batch[text]] = True
    sizes = [r["n"] for r in raws]
    codes = np.empty(int(sum(sizes)), dtype=np.int64)
    as_int = ~stringy[step_of_batch]
    if as_int.any():  # an integer id is its own code (codes only compare within a step)
        codes[np.repeat(as_int, sizes)] = np.frombuffer(
            b"".join(r[name]["i"] for r, yes in zip(raws, as_int, strict=True) if yes),
            dtype="<i8")
    if not as_int.all():
        mine = [r for r, yes in zip(raws, as_int, strict=True) if not yes]
        uniques, index = _strings(mine, name)
        # Python sorts runs of sorted strings (each batch's uniques are) far faster than numpy
        # sorts strings; equal strings share a rank.
        rank = dict(zip(sorted(uniques), range(len(uniques)), strict=True))
        ranks = np.fromiter(map(rank.__getitem__, uniques), dtype=np.int64, count=len(uniques))
        codes[np.repeat(~as_int, sizes)] = ranks[index]
    return codes


class Order:
    """A permutation of the samples (None: they are in order already, nothing to gather)."""

    def __init__(self, index: np.ndarray | None) -> None:
        self.index = index

    def take(self, column: np.ndarray) -> np.ndarray:
        return column if self.index is None else column[self.index]


def canonical_order(step: np.ndarray, group: np.ndarray, sample: np.ndarray,
                    reward: np.ndarray) -> Order:
    """The order by step, then group, sample id and reward (`step` is non-decreasing already,
    batches being laid out step by step). Trainers mostly send a step's samples in that order:
    a linear check then spares the sort (measured: 39 of 63 ms assembling 512 steps of 512
    samples). Ties (same group, sample id and reward) are duplicates."""
    if step.size > 1:
        same_step = step[1:] == step[:-1]
        g0, g1, s0, s1 = group[:-1], group[1:], sample[:-1], sample[1:]
        with np.errstate(invalid="ignore"):  # a NaN reward compares False: the sort decides
            ahead = (g1 > g0) | ((g1 == g0) & ((s1 > s0) | ((s1 == s0)
                                                            & (reward[1:] >= reward[:-1]))))
        if not (ahead | ~same_step).all():
            # lexsort: last key is primary.
            return Order(np.lexsort((reward, sample, group, step)))
    return Order(None)


def _metric_steps(steps: list[list[Raw]], names: list[str]) -> dict[str, np.ndarray]:
    """Which steps carried each sample metric: every step each one when every batch carries
    all of them (a trainer sends the same metrics at every step)."""
    if all(len(r["metrics"]) == len(names) for rs in steps for r in rs):
        return {k: np.ones(len(steps), dtype=bool) for k in names}
    return {k: np.array([any(k in r["metrics"] for r in rs) for rs in steps]) for k in names}


def _run_starts(codes: np.ndarray) -> np.ndarray:
    """Where each run of equal codes begins (codes not empty)."""
    return np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1))


def _run_index(new: np.ndarray) -> np.ndarray:
    """0, 1, 2… by runs, a new run where `new` is True (true at 0): `cumsum(new) − 1` by a
    repeat, which is several times faster."""
    starts = np.flatnonzero(new)
    return np.repeat(np.arange(starts.size), np.diff(starts, append=new.size))


def assemble_steps(steps: list[list[Raw]]) -> tuple[StepSamples, np.ndarray]:
    """Concatenate the unpacked batches of some steps (one list per step, each non-empty) into
    canonical-order StepSamples: by step, then group, sample id and reward. Work is per column
    over all batches at once, not per batch.

    Returns the samples and the latest sample `time` per step (NaN where no sample carried
    one)."""
    raws = [r for rs in steps for r in rs]
    sizes = np.array([r["n"] for r in raws], dtype=np.int64)
    step_of_batch = np.repeat(np.arange(len(steps)), [len(rs) for rs in steps])
    step = np.repeat(step_of_batch, sizes)
    sample_codes = _id_codes(raws, step_of_batch, len(steps), "sample_id")
    group_codes = _id_codes(raws, step_of_batch, len(steps), "group_id")
    reward = np.frombuffer(b"".join(r["reward"] for r in raws), dtype="<f8")
    order = canonical_order(step, group_codes, sample_codes, reward)
    step, group_codes = order.take(step), order.take(group_codes)
    new_group = np.ones(step.size, dtype=bool)
    new_group[1:] = (step[1:] != step[:-1]) | (group_codes[1:] != group_codes[:-1])

    env_names, env_codes = vocabulary(raws, "env")
    if env_names and env_names[0] == "":
        env_names, env_codes = env_names[1:], env_codes - 1
    reasons, reason_codes = vocabulary(raws, "discard_reason")
    known = [DISCARD_NAMES.index(r) if r in DISCARD_NAMES[1:] else 0 for r in reasons]
    discard = np.array(known, dtype=np.int8)[order.take(reason_codes)]

    def column(name: str) -> np.ndarray | None:
        col = float_column(raws, lambda r: r.get(name))
        return None if col is None else order.take(col)

    stop_length = None
    if any("stop_reason" in r for r in raws):
        stops, stop_codes = vocabulary(raws, "stop_reason")
        lut = np.array([np.nan if v == "" else float(v == "length") for v in stops])
        stop_length = lut[order.take(stop_codes)]
    names = sorted({k for r in raws for k in r["metrics"]})
    metrics = {k: order.take(_metric_column(raws, k)) for k in names}
    metric_steps = _metric_steps(steps, names)
    latest = np.full(len(steps), np.nan)
    times = column("time")
    if times is not None and step.size:
        starts = _run_starts(step)
        latest[step[starts]] = np.fmax.reduceat(times, starts)
    samples = StepSamples(
        reward=order.take(reward),
        group=_run_index(new_group),
        env=order.take(env_codes),
        env_names=list(env_names),
        discard=discard,
        advantage=column("advantage"),
        prompt_tokens=column("prompt_tokens"),
        completion_tokens=column("completion_tokens"),
        stop_length=stop_length,
        off_policy_steps=column("off_policy_steps"),
        metrics=metrics,
        step=step,
        n_steps=len(steps),
        metric_steps=metric_steps,
    )
    return samples, latest

