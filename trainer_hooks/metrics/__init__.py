"""Step metrics: how a training job records a step's values and reduces them exactly across
data-parallel ranks.

- `specs`: `MetricSpec` and `Reduce`, how each metric composes over chunks and ranks.
- `window`: `StepWindow`, the values of one optimizer step's gradient-accumulation chunks.
- `reduce`: `reduce_window`, the exact reduction across ranks (at most two collectives; torch
  only when a process group exists).
- `formulas`: per-chunk terms in the form a window needs (token entropy, KL estimators,
  log-prob gaps, clipping; GRPO group advantages and reports), torch imported when called.
- `adapter`: `MetricAdapter`, an objective's raw metric names → declared, phase-prefixed keys,
  with ready-made declarations.
- `timing`: `Timeline`, the `timing_*` keys of a step (wall clock or CUDA events).

Importing any of these never imports torch.
"""
