"""The one definition of series identity and catalog placement.

A series is (kind, key, stat, env). Its public id is opaque to clients but stable across runs
(so overlays and layouts match series of different runs): the four parts percent-encoded and
joined by `|`. The encoding leaves no `,` (ids are comma-separated in URLs) and no `|` inside a
part, so derived families can never collide with a trainer key: kind `step` is the only kind a
user key can take.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

from trainer_hooks.wire.protocol import split_key

KINDS = ("step", "reward", "sample", "advantage", "groups", "rollouts", "discarded", "ranges",
         "timeline")

SECTION_OF_KIND = {
    "reward": "Reward",
    "sample": "Sample metrics",
    "advantage": "Advantage",
    "groups": "Groups",
    "rollouts": "Rollouts",
    "discarded": "Discarded rollouts",
    "ranges": "Ranges",
}


@functools.lru_cache(maxsize=1 << 16)
def series_id(kind: str, key: str, stat: str | None = None, env: str | None = None) -> str:
    return "|".join(quote(part or "", safe="") for part in (kind, key, stat, env))


def timing_group(key: str) -> str:
    """The Timeline section's group of a `timing_*` key, the trainer's and the derived alike."""
    if key.endswith("_microbatch_mean") or key == "timing_microbatch_count":
        return "Per microbatch"
    if key.startswith(("timing_generation_", "timing_compute_reward_", "timing_avg_")) \
            or key == "timing_idle_pct":
        return "Inference"
    if key.startswith(("timing_weight_sync_", "timing_weight_broadcast_")):
        return "Weight sync"
    if key in ("timing_rank_spread", "timing_slowest_rank"):
        return "Ranks"
    return "Full step"


def placement(kind: str, key: str, stat: str | None, env: str | None) -> dict[str, str | None]:
    """Section, group and label of a series for the All view."""
    if kind == "timeline" or kind == "step":
        if key.startswith("timing_") and (kind == "timeline" or "/" not in key):
            return {"section": "Timeline", "group": timing_group(key), "label": key}
        section, sub, metric = split_key(key)
        return {"section": section, "group": sub, "label": metric}
    where = f" [{env}]" if env else ""
    if stat is None or stat == key:
        label = f"{key}{where}"
    else:
        label = f"{key} {stat}{where}"
    return {"section": SECTION_OF_KIND[kind], "group": key, "label": label}
