"""String columns of few distinct values (env, discard_reason, stop_reason) are validated once per
distinct value and carry their dictionary (`Samples.dictionaries`): it must be exactly what
np.unique gives and the column exactly what the plain path gives; and `observed_in`'s segment
reductions must equal a per-environment oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.core.normalize import observed_in
from trainer_hooks.wire import columns as wc
from trainer_hooks.wire import protocol as p

ENVS = ["math", "code", "countdown", "é-unicode", "", "a b"]


def samples(env: Any, n: int, **over: Any) -> dict[str, Any]:
    msg = {"v": 1, "id": "m", "type": "samples", "run": "r", "step": 1,
           "sample_id": list(range(n)), "group_id": [i // 4 for i in range(n)],
           "reward": [float(i % 5) for i in range(n)], "env": env}
    msg.update(over)
    return msg


def check_coded(got: p.Samples, name: str, values: list[str]) -> None:
    """The column equals the plain path's, and its dictionary is np.unique's."""
    plain = np.array(values, dtype=str)
    column = getattr(got, name)
    assert column.dtype == plain.dtype and np.array_equal(column, plain)
    uniques, codes = got.dictionaries[name]
    want_u, want_codes = np.unique(plain, return_inverse=True)
    assert uniques.dtype == want_u.dtype and uniques.tolist() == want_u.tolist()
    assert np.array_equal(codes, want_codes)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(ENVS), min_size=wc.FEW_MIN_SAMPLES, max_size=300),
       st.lists(st.sampled_from(["", "max_async", "zero_advantage"]), min_size=300,
                max_size=300),
       st.lists(st.sampled_from(["length", "stop", "ünïcode", ""]), min_size=300, max_size=300))
def test_coded_columns_are_the_plain_columns_and_their_dictionaries_are_np_unique(
        envs: list[str], reasons: list[str], stops: list[str]) -> None:
    n = len(envs)  # ≥ 64 samples of at most 6 values: always coded
    got = p.validate_message(samples(envs, n, discard_reason=reasons[:n],
                                     stop_reason=stops[:n]))
    assert isinstance(got, p.Samples)
    check_coded(got, "env", envs)
    check_coded(got, "discard_reason", reasons[:n])
    check_coded(got, "stop_reason", stops[:n])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=4), min_size=1, max_size=200))
def test_any_string_column_is_the_plain_column_and_a_dictionary_if_any_is_np_unique(
        envs: list[str]) -> None:
    envs = [e for e in envs if e.isprintable()] or ["x"]
    got = p.validate_message(samples(envs, len(envs)))
    assert isinstance(got, p.Samples)
    plain = np.array(envs, dtype=str)
    assert got.env.dtype == plain.dtype and np.array_equal(got.env, plain)
    if "env" in got.dictionaries:
        check_coded(got, "env", envs)
    else:
        assert len(envs) < wc.FEW_MIN_SAMPLES or len(set(envs)) * wc.FEW_SHARE > len(envs)


def test_a_long_column_of_two_values_is_coded_and_a_scalar_too() -> None:
    envs = ["math", "code"] * 100
    got = p.validate_message(samples(envs, 200))
    assert isinstance(got, p.Samples)
    assert got.dictionaries["env"][0].tolist() == ["code", "math"]
    one = p.validate_message(samples("math", 200))
    assert isinstance(one, p.Samples)
    assert one.dictionaries["env"][0].tolist() == ["math"] and not one.dictionaries["env"][1].any()


def test_a_control_character_in_a_coded_column_is_refused_naming_it() -> None:
    envs = ["math"] * 199 + ["ma\nth"]
    with pytest.raises(p.ProtocolError) as err:
        p.validate_message(samples(envs, 200))
    assert err.value.field == "env" and "control" in err.value.message


@pytest.mark.parametrize("n", [4, 200])  # the plain path and the coded one
def test_values_numpy_would_merge_are_refused_naming_the_column(n: int) -> None:
    # numpy drops a trailing NUL, so "a\x00" would be stored as "a": refused instead.
    envs = ["a"] * (n // 2) + ["a\x00"] * (n // 2)
    with pytest.raises(p.ProtocolError) as err:
        p.validate_message(samples(envs, n))
    assert err.value.field == "env" and "control" in err.value.message


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans(),
                          st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                    st.just(float("nan")))),
                min_size=1, max_size=60))
def test_observed_in_equals_a_per_environment_oracle(rows: list[tuple[int, bool, float]]
                                                      ) -> None:
    names = ["e0", "e1", "", "e3"]
    codes = np.array([r[0] for r in rows])
    kept = np.array([r[1] for r in rows])
    values = np.array([r[2] for r in rows])
    got = observed_in(names, codes, kept, [("reward", "reward", values)])
    want = {}
    for k, name in enumerate(names):
        finite = [v for c, keep, v in rows if c == k and keep and np.isfinite(v)]
        if finite:
            want[(name, "reward", "reward")] = (min(finite), max(finite))
    assert got == want
    assert np.array_equal(values, np.array([r[2] for r in rows]), equal_nan=True)  # untouched


@pytest.mark.parametrize(("odd", "code"), [
    (7, "wrong_type"), (True, "wrong_type"), (["math"], "wrong_type"), ({"a": 1}, "wrong_type"),
    (b"math", "wrong_type"), (1.5, "wrong_type"), ("ma\u200bth", "invalid"), ("m\x00", "invalid"),
])
def test_one_bad_value_in_a_long_column_of_few_is_refused_by_name(odd: Any, code: str) -> None:
    """The few-values path checks each distinct value once: a value of another type, or one
    deceptive string, among 199 good ones is still refused, naming the column."""
    for at in (0, 100, 199):
        envs: list[Any] = ["math", "code"] * 100
        envs[at] = odd
        with pytest.raises(p.ProtocolError) as err:
            p.validate_message(samples(envs, 200))
        assert err.value.code == code and err.value.field == "env"


def test_nulls_in_a_long_column_of_few_are_blanks() -> None:
    envs = ["math", None] * 100
    got = p.validate_message(samples(envs, 200))
    assert isinstance(got, p.Samples)
    assert got.env.tolist() == ["math", ""] * 100
