"""From an objective's algorithm-local metric names to declared, phase-prefixed step metrics.

`MetricAdapter` has the shape of the reference's adapter (posttrain-metrics-reference.md, "How a
metric gets its name"): `internal_prefix` is stripped from each raw key, `names` maps the
stripped source name to a public leaf, and `phases` prefix the leaf (`train/loss_avg`). The
reduction follows from the declarations: `weighted_by` → WEIGHTED_MEAN (the weight is summed),
`max_reduced` → MAX, `summed` → SUM, `last` → LAST, anything else a pooled MEAN. `ignored`
source keys are dropped; any other undeclared key is an error, so nothing is published by
accident. Ready-made declarations follow for the reference's keys and Telescope's defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_hooks.metrics.specs import MetricSpec, Reduce

PHASES = frozenset({"train", "val"})


def _frozen(items: Iterable[str]) -> frozenset[str]:
    return frozenset(items)


@dataclass(frozen=True)
class MetricAdapter:
    """Declares how one objective's raw metrics are published.

    Every field other than `internal_prefix`/`phases` speaks in stripped source names (the raw
    key minus `internal_prefix`, when it starts with it).
    """

    internal_prefix: str
    names: Mapping[str, str]
    phases: frozenset[str] = frozenset({"train"})
    weighted_by: Mapping[str, str] = field(default_factory=dict)
    max_reduced: frozenset[str] = frozenset()
    summed: frozenset[str] = frozenset()
    last: frozenset[str] = frozenset()
    integer: frozenset[str] = frozenset()
    ignored: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for attr in ("phases", "max_reduced", "summed", "last", "integer", "ignored"):
            object.__setattr__(self, attr, _frozen(getattr(self, attr)))
        object.__setattr__(self, "names", dict(self.names))
        object.__setattr__(self, "weighted_by", dict(self.weighted_by))
        self._validate()

    def _validate(self) -> None:
        if not self.phases or not self.phases <= PHASES:
            raise ValueError(f"phases must be a non-empty subset of {sorted(PHASES)}")
        leaves = list(self.names.values())
        bad = [leaf for leaf in leaves if not leaf or "/" in leaf]
        if bad:
            raise ValueError(f"public leaves may not be empty or contain '/': {bad}")
        if len(set(leaves)) != len(leaves):
            raise ValueError("two source names map to the same public leaf")
        declared = set(self.names)
        groups = {
            "weighted_by": set(self.weighted_by) | set(self.weighted_by.values()),
            "max_reduced": self.max_reduced,
            "summed": self.summed,
            "last": self.last,
            "integer": self.integer,
        }
        for label, group in groups.items():
            if not group <= declared:
                raise ValueError(f"{label} mentions undeclared names {sorted(group - declared)}")
        if self.ignored & declared:
            raise ValueError(f"names both published and ignored: {sorted(self.ignored & declared)}")
        self._check_disjoint()

    def _check_disjoint(self) -> None:
        kinds = [set(self.weighted_by), set(self.max_reduced), set(self.summed), set(self.last)]
        seen: set[str] = set()
        for kind in kinds:
            if seen & kind:
                raise ValueError(f"names given two reductions: {sorted(seen & kind)}")
            seen |= kind
        weights = set(self.weighted_by.values())
        if weights & (seen - self.summed):
            raise ValueError(
                f"weight keys must be summed: {sorted(weights & (seen - self.summed))}"
            )
        for source in self.integer:
            if self._reduce(source) not in (Reduce.SUM, Reduce.MAX, Reduce.LAST):
                raise ValueError(f"integer {source!r} must be summed, max-reduced or last")

    # ------------------------------------------------------------------ declarations

    def public_name(self, source: str, phase: str = "train") -> str:
        """`<phase>/<leaf>` for a stripped source name."""
        if phase not in self.phases:
            raise ValueError(f"phase {phase!r} is not one of this adapter's {sorted(self.phases)}")
        return f"{phase}/{self.names[source]}"

    def specs(self, phase: str | None = None) -> list[MetricSpec]:
        """The MetricSpecs this adapter publishes, for one phase or (None) every phase."""
        phases = sorted(self.phases) if phase is None else [phase]
        return [self._spec(source, p) for p in phases for source in sorted(self.names)]

    def _reduce(self, source: str) -> Reduce:
        if source in self.weighted_by:
            return Reduce.WEIGHTED_MEAN
        if source in self.max_reduced:
            return Reduce.MAX
        if source in self.last:
            return Reduce.LAST
        if source in self.summed or source in self.weighted_by.values():
            return Reduce.SUM
        return Reduce.MEAN

    def _spec(self, source: str, phase: str) -> MetricSpec:
        weight = self.weighted_by.get(source)
        return MetricSpec(
            self.public_name(source, phase),
            self._reduce(source),
            weight_key=None if weight is None else self.public_name(weight, phase),
            integer=source in self.integer,
        )

    # ------------------------------------------------------------------ mapping

    def source_name(self, raw_key: str) -> str:
        """The raw key with `internal_prefix` stripped (unchanged when it lacks the prefix)."""
        prefix = self.internal_prefix
        return raw_key[len(prefix) :] if prefix and raw_key.startswith(prefix) else raw_key

    def map(self, raw: Mapping[str, Any], phase: str = "train") -> dict[str, Any]:
        """Raw objective output → `{<phase>/<leaf>: value}`, ready for `StepWindow.add_many`.

        Ignored keys are dropped; a key neither named nor ignored raises ValueError.
        """
        out: dict[str, Any] = {}
        for key, value in raw.items():
            source = self.source_name(key)
            if source in self.ignored:
                continue
            if source not in self.names:
                raise ValueError(
                    f"objective emitted {key!r}, which the adapter neither names nor ignores"
                )
            out[self.public_name(source, phase)] = value
        return out


# ---------------------------------------------------------------- ready-made declarations

_GRPO_WEIGHTED = {
    "loss": "weight_sum",
    "clip_frac": "valid_token_count",
    "ratio_absdev": "valid_token_count",
    "kl_mean": "valid_token_count",
    "seq_clip_frac": "valid_sequence_count",
    "seq_log_ratio_abs": "valid_sequence_count",
    "logprob_gap_mean": "logprob_gap_token_count",
    "mean_rank_logprob_gap_p99": "logprob_gap_token_count",
    "logprob_gap_gt0p5_frac": "logprob_gap_token_count",
    "rollout_truncated_frac": "response_count",
    "response_len_mean": "response_count",
    **{
        key: "sc_token_count"
        for key in (
            "sc_head_mass_q",
            "sc_head_mass_p",
            "sc_rho_mean",
            "sc_kl_head",
            "sc_correction_abs",
            "sc_token_weight",
            "sc_out_of_head_frac",
        )
    },
}
_GRPO_COUNTS = frozenset(
    {
        "valid_sequence_count",
        "valid_token_count",
        "logprob_gap_token_count",
        "response_count",
        "routing_replay_pinned_tokens",
        "sc_token_count",
    }
)
_GRPO_PLAIN = ("routing_replay_pinned_blocks", "kl_beta")
_GRPO_MAX = frozenset({"kl_max", "response_len_max", "sc_rho_max"})
_GRPO_SOURCES = (*_GRPO_WEIGHTED, *_GRPO_COUNTS, "weight_sum", *_GRPO_PLAIN, *_GRPO_MAX)

#: The reference's GRPO objective adapter (`_GRPO_METRIC_ADAPTER`), shared keys included:
#: `grpo_loss` publishes as `train/loss_avg`; every other key keeps its stripped name.
GRPO_ADAPTER = MetricAdapter(
    internal_prefix="grpo_",
    names={source: source for source in _GRPO_SOURCES} | {"loss": "loss_avg"},
    weighted_by=_GRPO_WEIGHTED,
    max_reduced=_GRPO_MAX,
    summed=_GRPO_COUNTS | {"weight_sum"},
    integer=_GRPO_COUNTS | {"response_len_max"},
)

#: Shared trainer keys (not from the objective): pre-clip grad norm is the last chunk's,
#: the learning rate and end-to-end step time are plain means, as the reference tables say.
SHARED_TRAINER_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("train/grad_norm", Reduce.LAST),
    MetricSpec("train/learning_rate", Reduce.MEAN),
    MetricSpec("timer/e2e_step_s", Reduce.MEAN),
)

#: GRPO reward/grouping report: counts sum over ranks; reward_mean is weighted by the
#: trajectories scored. reward_std is not declared: a std does not compose from per-rank stds.
GRPO_REWARD_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("train/reward_mean", Reduce.WEIGHTED_MEAN, weight_key="train/rollout_count"),
    MetricSpec("train/reward_min", Reduce.MIN),
    MetricSpec("train/reward_max", Reduce.MAX),
    MetricSpec("train/rollout_count", Reduce.SUM, integer=True),
    *(
        MetricSpec(f"train/grpo_{kind}_count", Reduce.SUM, integer=True)
        for kind in (
            "group",
            "informative_group",
            "tied_group",
            "all_zero_group",
            "all_one_group",
        )
    ),
)

#: Numeric optimizer outcome keys (`BaseTrainer._outcome_metrics`): the window's last attempt
#: decides; flags travel as 0/1. `update_outcome` and `skip_reason` are strings: not metrics.
OPTIMIZER_OUTCOME_SPECS: tuple[MetricSpec, ...] = tuple(
    MetricSpec(f"optim/{key}", Reduce.LAST, integer=True)
    for key in (
        "step_skipped",
        "attempt_id",
        "optimizer_step",
        "nonfinite_skips_total",
        "nonfinite_skips_consecutive",
        "zero_grad_skips_total",
        "finite_gradient_check_enabled",
    )
)

#: Telescope's default step metrics. Entropy and the rollout KL are token means, weighted by
#: `num_tokens` (the chunk's loss-masked token count, also published).
TELESCOPE_STEP_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("entropy", Reduce.WEIGHTED_MEAN, weight_key="num_tokens"),
    MetricSpec("kl_divergence_inference", Reduce.WEIGHTED_MEAN, weight_key="num_tokens"),
    MetricSpec("num_tokens", Reduce.SUM, integer=True),
    MetricSpec("grad_norm", Reduce.LAST),
    MetricSpec("learning_rate", Reduce.LAST),
)


def grpo_specs() -> list[MetricSpec]:
    """Every ready-made declaration for a GRPO run: objective, trainer, reward report,
    optimizer outcome and Telescope defaults (one list, safe to pass to StepWindow)."""
    return [
        *GRPO_ADAPTER.specs(),
        *SHARED_TRAINER_SPECS,
        *GRPO_REWARD_SPECS,
        *OPTIMIZER_OUTCOME_SPECS,
        *TELESCOPE_STEP_SPECS,
    ]
