"""StepWindow, MetricSpec/SpecSet validation and the single-process reduce_window path."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_hooks.metrics.reduce import reduce_window
from trainer_hooks.metrics.specs import MetricSpec, Reduce, spec_set
from trainer_hooks.metrics.window import StepWindow, UnknownMetricError

R = Reduce
SPECS = (
    MetricSpec("ent", R.WEIGHTED_MEAN, weight_key="tok"),
    MetricSpec("tok", R.SUM, integer=True),
    MetricSpec("loss", R.MEAN),
    MetricSpec("total", R.SUM),
    MetricSpec("kmax", R.MAX),
    MetricSpec("kmin", R.MIN),
    MetricSpec("gn", R.LAST),
)
ROOT = Path(__file__).resolve().parents[2]


def window_of(chunks: list[dict[str, list[float]]]) -> StepWindow:
    window = StepWindow(SPECS)
    for chunk in chunks:
        for name, values in chunk.items():
            for value in values:
                window.add(name, value)
        window.end_chunk()
    return window


# ---------------------------------------------------------------- declarations


def test_weighted_mean_needs_a_weight_key() -> None:
    with pytest.raises(ValueError, match="needs a weight_key"):
        MetricSpec("x", R.WEIGHTED_MEAN)
    with pytest.raises(ValueError, match="only meaningful with WEIGHTED_MEAN"):
        MetricSpec("x", R.MEAN, weight_key="w")
    with pytest.raises(ValueError, match="weighted by itself"):
        MetricSpec("x", R.WEIGHTED_MEAN, weight_key="x")


def test_integer_needs_a_reduction_that_stays_integral() -> None:
    with pytest.raises(ValueError, match="a mean is not an integer"):
        MetricSpec("x", R.MEAN, integer=True)
    assert MetricSpec("x", "max", integer=True).reduce is R.MAX  # string values accepted


def test_bad_names_are_rejected() -> None:
    for bad in ("", "a//b", "x\n", "/lead"):
        with pytest.raises(ValueError):
            MetricSpec(bad, R.MEAN)


def test_spec_set_validates_the_set() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        spec_set([MetricSpec("a", R.MEAN), MetricSpec("a", R.SUM)])
    with pytest.raises(ValueError, match="not declared"):
        spec_set([MetricSpec("a", R.WEIGHTED_MEAN, weight_key="w")])
    with pytest.raises(ValueError, match="must be declared with Reduce.SUM"):
        spec_set([MetricSpec("a", R.WEIGHTED_MEAN, weight_key="w"), MetricSpec("w", R.MEAN)])
    with pytest.raises(ValueError, match="collides"):
        spec_set([MetricSpec("a", R.MEAN), MetricSpec("a/nonfinite", R.SUM)])
    merged = spec_set([MetricSpec("a", R.MEAN), MetricSpec("a", R.MEAN)])  # identical: merged
    assert merged.names() == ("a",)


def test_layout_digest_ignores_declaration_order_but_not_content() -> None:
    forward, backward = spec_set(SPECS), spec_set(reversed(SPECS))
    assert forward.digest == backward.digest and forward.names() == backward.names()
    changed = spec_set((*SPECS[:-1], MetricSpec("gn", R.MAX)))
    assert changed.digest != forward.digest


# ---------------------------------------------------------------- accumulation


def test_each_reduction_over_chunks() -> None:
    window = window_of(
        [
            {
                "ent": [2.0],
                "tok": [3],
                "loss": [1.0, 2.0],
                "kmax": [-3.0],
                "kmin": [5.0],
                "gn": [1.0],
            },
            {
                "ent": [4.0],
                "tok": [1],
                "loss": [6.0],
                "total": [0.5],
                "kmax": [-1.0],
                "gn": [2.0, 9.0],
            },
            {"kmin": [-2.0]},
        ]
    )
    got = reduce_window(window)
    assert got == {
        "ent": (2.0 * 3 + 4.0 * 1) / 4,
        "gn": 9.0,
        "kmax": -1.0,
        "kmin": -2.0,
        "loss": 3.0,
        "tok": 4,
        "total": 0.5,
    }
    assert type(got["tok"]) is int and window.chunks == 3


def test_unknown_key_is_a_clear_error_and_add_many_adds_nothing() -> None:
    window = StepWindow(SPECS)
    with pytest.raises(UnknownMetricError, match="'entropy' is not declared"):
        window.add_many({"loss": 1.0, "entropy": 2.0})
    assert not window.open


def test_non_finite_values_are_dropped_and_counted() -> None:
    window = window_of([{"loss": [math.nan, 1.0, math.inf], "kmax": [-math.inf]}])
    assert window.nonfinite == {"loss": 2, "kmax": 1}
    assert reduce_window(window) == {"loss": 1.0, "loss/nonfinite": 2, "kmax/nonfinite": 1}
    assert reduce_window(window, report_nonfinite=False) == {"loss": 1.0}


def test_weighted_value_needs_its_weight_in_the_same_chunk() -> None:
    window = StepWindow(SPECS)
    window.add("ent", 1.0)
    with pytest.raises(ValueError, match="without its weight 'tok'"):
        window.end_chunk()
    window.add("ent", 2.0)
    window.add("tok", 3)
    with pytest.raises(ValueError, match="added 2 times in one chunk"):
        window.end_chunk()


def test_negative_weight_is_rejected() -> None:
    window = StepWindow(SPECS)
    window.add_many({"ent": 1.0, "tok": -2})
    with pytest.raises(ValueError, match="negative"):
        window.end_chunk()


def test_a_non_finite_weight_drops_its_value_and_counts_it() -> None:
    window = window_of([{"ent": [1.0], "tok": [math.nan]}, {"ent": [3.0], "tok": [2]}])
    assert reduce_window(window) == {"ent": 3.0, "tok": 2, "ent/nonfinite": 1, "tok/nonfinite": 1}


def test_zero_weight_and_empty_means_are_omitted_not_zero() -> None:
    window = window_of([{"ent": [5.0], "tok": [0]}, {}])
    assert reduce_window(window) == {"tok": 0}


def test_integer_coercion() -> None:
    window = StepWindow(SPECS)
    window.add("tok", np.int64(3))
    window.add("tok", 4.0)
    with pytest.raises(ValueError, match="non-integral"):
        window.add("tok", 4.5)
    with pytest.raises(TypeError):
        window.add("loss", "1.0")
    window.end_chunk()
    assert reduce_window(window) == {"tok": 7}


def test_integer_extrema_beyond_float_precision_are_refused() -> None:
    window = StepWindow(
        [MetricSpec("m", R.MAX, integer=True), MetricSpec("s", R.SUM, integer=True)]
    )
    with pytest.raises(ValueError, match="2\\*\\*53"):
        window.add("m", 2**53 + 1)
    window.add("s", 2**70 + 1)  # SUM travels as two halves: exact
    window.add("s", 2**70)
    assert reduce_window(window) == {"s": 2**71 + 1}


def test_reduce_closes_an_open_chunk_and_dst_none_works_locally() -> None:
    window = StepWindow(SPECS)
    window.add("gn", 1.5)
    assert window.open
    assert reduce_window(window, dst=None) == {"gn": 1.5}
    assert not window.open and window.chunks == 1


def test_local_reduce_rejects_a_bad_dst() -> None:
    with pytest.raises(ValueError, match="dst=1"):
        reduce_window(StepWindow(SPECS), dst=1)


def test_clear_keeps_declarations() -> None:
    window = window_of([{"loss": [1.0]}])
    window.clear()
    assert reduce_window(window) == {} and window.chunks == 0


# ---------------------------------------------------------------- merging

chunk_values = st.integers(-1000, 1000).map(float)
chunk = st.fixed_dictionaries(
    {},
    optional={
        "loss": st.lists(chunk_values, min_size=1, max_size=3),
        "total": st.lists(chunk_values, min_size=1, max_size=3),
        "kmax": st.lists(chunk_values, min_size=1, max_size=3),
        "kmin": st.lists(chunk_values, min_size=1, max_size=3),
        "gn": st.lists(chunk_values, min_size=1, max_size=3),
        "ent": st.tuples(chunk_values, st.integers(0, 50)),
    },
)


def _window_from(chunks: list[dict]) -> StepWindow:
    plain = []
    for c in chunks:
        c = dict(c)
        if "ent" in c:
            value, weight = c.pop("ent")
            c["ent"], c["tok"] = [value], [weight]
        plain.append(c)
    return window_of(plain)


@settings(max_examples=150, deadline=None)
@given(st.lists(chunk, max_size=4), st.lists(chunk, max_size=4), st.lists(chunk, max_size=4))
def test_merge_is_associative_and_equals_sequential_accumulation(a: list, b: list, c: list) -> None:
    wa, wb, wc = _window_from(a), _window_from(b), _window_from(c)
    left, right = (wa + wb) + wc, wa + (wb + wc)
    assert left == right
    assert left == _window_from(a + b + c)
    assert reduce_window(left) == reduce_window(_window_from(a + b + c))


def test_merge_continues_chunk_ordinals_for_last() -> None:
    early, late = window_of([{"gn": [1.0]}, {}]), window_of([{}, {"gn": [2.0]}, {}])
    merged = early + late
    state = merged.state("gn")
    assert state is not None and (state.total, state.chunk) == (2.0, 3)
    assert (late + early).state("gn").total == 1.0  # type: ignore[union-attr]


def test_merge_refuses_open_chunks_and_other_declarations() -> None:
    open_window = StepWindow(SPECS)
    open_window.add("loss", 1.0)
    with pytest.raises(ValueError, match="end_chunk"):
        open_window + StepWindow(SPECS)
    with pytest.raises(ValueError, match="different metric declarations"):
        StepWindow(SPECS) + StepWindow(SPECS[2:])


# ---------------------------------------------------------------- torch-free


def test_the_window_path_never_imports_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        from trainer_hooks import MetricSpec, Reduce, StepWindow, reduce_window
        import trainer_hooks.metrics.adapter, trainer_hooks.metrics.formulas
        import trainer_hooks.metrics.timing
        w = StepWindow([MetricSpec("a", Reduce.MEAN)])
        w.add("a", 1.0)
        assert reduce_window(w) == {"a": 1.0}
        assert "torch" not in sys.modules, "torch was imported"
        assert "django" not in sys.modules
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
