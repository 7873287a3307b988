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


def placement(kind: str, key: str, stat: str | None, env: str | None) -> dict[str, str | None]:
    """Section, group and label of a series for the All view."""
    if kind == "timeline" or kind == "step":
        if key.startswith("timing_") and (kind == "timeline" or "/" not in key):
            group = "Per microbatch" if key.endswith("_microbatch_mean") else "Full step"
            return {"section": "Timeline", "group": group, "label": key}
        section, sub, metric = split_key(key)
        return {"section": section, "group": sub, "label": metric}
    where = f" [{env}]" if env else ""
    if stat is None or stat == key:
        label = f"{key}{where}"
    else:
        label = f"{key} {stat}{where}"
    return {"section": SECTION_OF_KIND[kind], "group": key, "label": label}
