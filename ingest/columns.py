"""Compact columnar storage of raw samples, and assembly of a step's samples for aggregation.

A stored batch is one msgpack map: float columns as raw float64 bytes, string columns
dictionary-encoded (unique values + int32 codes). Assembly concatenates every batch of a step
and sorts the samples into a canonical order, so aggregates do not depend on how samples were
split into messages or in which order those arrived.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from ingest.samples import DISCARD_NAMES, StepSamples
from trainer_hooks.protocol import Samples

FLOAT_COLUMNS = ("reward", "advantage", "prompt_tokens", "completion_tokens",
                 "off_policy_steps", "time")
# Ids are integers or strings (the wire allows both); the others are always strings.
STRING_COLUMNS = ("sample_id", "group_id", "env", "stop_reason", "discard_reason")


def encode_batch(s: Samples, mask: np.ndarray) -> bytes:
    """The samples of `s` selected by `mask` as one compact blob."""
    out: dict[str, Any] = {"n": int(mask.sum())}
    for name in FLOAT_COLUMNS:
        col = getattr(s, name)
        if col is not None:
            out[name] = np.ascontiguousarray(col[mask], dtype="<f8").tobytes()
    for name in STRING_COLUMNS:
        col = getattr(s, name)
        if col is None:
            continue
        if col.dtype.kind == "i":
            out[name] = {"i": np.ascontiguousarray(col[mask], dtype="<i8").tobytes()}
        else:
            uniques, codes = np.unique(col[mask], return_inverse=True)
            out[name] = {"u": uniques.tolist(), "c": codes.astype("<i4").tobytes()}
    out["metrics"] = {k: np.ascontiguousarray(v[mask], dtype="<f8").tobytes()
                      for k, v in s.metrics.items()}
    return msgpack.packb(out, use_bin_type=True)


def decode_batch(blob: bytes) -> dict[str, Any]:
    """A stored blob back to columns: float64 arrays and numpy string arrays."""
    raw = msgpack.unpackb(bytes(blob), raw=False)
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


def _float_concat(batches: list[dict[str, Any]], get: Any) -> np.ndarray | None:
    parts = [get(b) for b in batches]
    if all(p is None for p in parts):
        return None
    return np.concatenate([
        np.full(b["n"], np.nan) if p is None else p for b, p in zip(batches, parts, strict=True)
    ])


def _str_concat(batches: list[dict[str, Any]], name: str) -> np.ndarray:
    return np.concatenate([b.get(name, np.full(b["n"], "")) for b in batches])


def _id_concat(batches: list[dict[str, Any]], name: str) -> np.ndarray:
    """Integer ids stay integers; if any batch used strings, all become strings (so 7 and "7"
    are one id, as they are on the wire)."""
    parts = [b[name] for b in batches]
    if all(p.dtype.kind == "i" for p in parts):
        return np.concatenate(parts)
    return np.concatenate([p.astype(str) for p in parts])


def assemble_step(batches: list[dict[str, Any]]) -> tuple[StepSamples, float | None]:
    """Concatenate decoded batches of one step into canonical-order StepSamples.

    Returns the samples and the latest sample `time` (None when no sample carried one)."""
    sample_codes = np.unique(_id_concat(batches, "sample_id"), return_inverse=True)[1]
    group_codes = np.unique(_id_concat(batches, "group_id"), return_inverse=True)[1]
    reward = np.concatenate([b["reward"] for b in batches])
    # lexsort: last key is primary. Ties (same group, sample id and reward) are duplicates.
    order = np.lexsort((reward, sample_codes, group_codes))

    envs = _str_concat(batches, "env")[order]
    env_names, env_codes = np.unique(envs, return_inverse=True)
    if env_names.size and env_names[0] == "":
        env_names, env_codes = env_names[1:], env_codes - 1
    discard_names = _str_concat(batches, "discard_reason")[order]
    discard = np.zeros(order.size, dtype=np.int8)
    for code, name in enumerate(DISCARD_NAMES[1:], start=1):
        discard[discard_names == name] = code

    def column(name: str) -> np.ndarray | None:
        col = _float_concat(batches, lambda b: b.get(name))
        return None if col is None else col[order]

    stop_length = None
    if any("stop_reason" in b for b in batches):
        reasons = _str_concat(batches, "stop_reason")[order]
        stop_length = np.where(reasons == "", np.nan, (reasons == "length").astype(np.float64))
    names = sorted({k for b in batches for k in b["metrics"]})
    metrics = {
        k: _float_concat(batches, lambda b, k=k: b["metrics"].get(k))[order]  # type: ignore[index]
        for k in names
    }
    times = column("time")
    latest = None if times is None or np.isnan(times).all() else float(np.nanmax(times))
    samples = StepSamples(
        reward=reward[order],
        group=np.unique(group_codes[order], return_inverse=True)[1].astype(np.int64),
        env=env_codes.astype(np.int64),
        env_names=[str(e) for e in env_names],
        discard=discard,
        advantage=column("advantage"),
        prompt_tokens=column("prompt_tokens"),
        completion_tokens=column("completion_tokens"),
        stop_length=stop_length,
        off_policy_steps=column("off_policy_steps"),
        metrics=metrics,
    )
    return samples, latest
