"""The wire validator's rules for values a database would refuse or alter, and for fields it
does not know: each is an error naming the field, or a field named in `left_out`,
never a value stored otherwise than it was sent."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from trainer_hooks.wire import protocol as p


def start(**extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": "s", "type": "run.start", "run": "r", **extra}


def samples(n: int = 2, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": "x", "type": "samples", "run": "r", "step": 0,
            "sample_id": list(range(n)), "group_id": [0] * n, "reward": [0.5] * n, **extra}


def refused(msg: dict[str, Any]) -> p.ProtocolError:
    with pytest.raises(p.ProtocolError) as info:
        p.validate_message(msg)
    return info.value


@pytest.mark.parametrize("version", [True, 1.0, "1", 2, None])
def test_the_version_is_the_integer_1(version: Any) -> None:
    error = refused(start(v=version))
    assert (error.code, error.field) == ("bad_version", "v")
    assert isinstance(p.validate_message(start(v=1)), p.RunStart)


NUL_CASES = [
    ("message id", start(id="s\x00"), "id"),
    ("config string, nested", start(config={"a": {"b": ["ok", "x\x00y"]}}), "config"),
    ("config key", start(config={"opt": {"lr\x00": 1e-3}}), "config"),
    ("string sample id", samples(sample_id=["a\x00b", "c"]), "sample_id"),
    ("trailing NUL in a group id", samples(group_id=["g\x00", 7]), "group_id"),
    ("trailing NUL in an env list", samples(env=["a", "a\x00"]), "env"),
    ("trailing NUL in the one env", samples(env="a\x00"), "env"),
    ("trailing NUL among few distinct envs", samples(100, env=["a"] * 99 + ["a\x00"]), "env"),
    ("trailing NUL in a stop reason", samples(stop_reason=["stop\x00", None]), "stop_reason"),
]


@pytest.mark.parametrize(("case", "msg", "field"), NUL_CASES, ids=[c[0] for c in NUL_CASES])
def test_a_nul_character_is_refused_naming_the_field(case: str, msg: dict[str, Any],
                                                     field: str) -> None:
    error = refused(msg)
    assert error.field == field and error.code == "invalid", (case, error.message)
    assert "NUL" in error.message or "control" in error.message


def test_sample_text_may_hold_nul_it_is_stored_as_bytes() -> None:
    msg = p.validate_message(samples(prompt=["a\x00b", None], completion=["\x00", "c"]))
    assert isinstance(msg, p.Samples) and msg.prompt == ["a\x00b", None]


def test_a_samples_time_list_is_range_checked_like_a_message_time() -> None:
    error = refused(samples(time=[1.7e9, 1.7e12]))
    assert error.field == "time" and "time[1]" in error.message
    assert "milliseconds" in error.message
    assert refused(samples(time=[-1.0, None])).field == "time"
    ok = p.validate_message(samples(time=[1.7e9, None]))
    assert isinstance(ok, p.Samples) and ok.time is not None
    assert ok.time[0] == 1.7e9 and np.isnan(ok.time[1])


def test_one_samples_time_is_every_sample_time_and_range_checked() -> None:
    msg = p.validate_message(samples(3, time=1.7e9))
    assert isinstance(msg, p.Samples) and msg.time is not None
    assert msg.time.tolist() == [1.7e9] * 3
    assert refused(samples(time=1.7e12)).field == "time"


def test_a_field_that_is_no_samples_column_is_left_out_and_named() -> None:
    msg = p.validate_message(samples(advantages=[0.1, 0.2], colour="red", incarnation="i"))
    assert isinstance(msg, p.Samples) and msg.advantage is None
    assert set(msg.left_out) == {"advantages", "colour"}
    assert "did you mean 'advantage'?" in msg.left_out["advantages"]
    plain = p.validate_message(samples(advantage=[0.1, 0.2]))
    assert isinstance(plain, p.Samples) and plain.left_out == {}


def test_a_message_of_many_unknown_fields_is_refused() -> None:
    error = refused(samples(**{f"junk{i}": 1 for i in range(101)}))
    assert (error.code, error.field) == ("too_many", "junk0")


@pytest.mark.parametrize("order", ["rising", "shuffled"])
def test_a_samples_message_spans_at_most_the_step_cap(order: str) -> None:
    """Counted from the differences when the steps never go down, by sorting otherwise: the
    same answer either way, at the cap and one past it."""
    cap = p.MAX_STEPS_PER_MESSAGE
    rng = np.random.default_rng(3)
    for distinct, ok in ((cap, True), (cap + 1, False)):
        steps = np.repeat(np.arange(distinct), 3)  # each step three times
        if order == "shuffled":
            steps = rng.permutation(steps)
        msg = samples(steps.size, step=steps.tolist())
        if ok:
            got = p.validate_message(msg)
            assert isinstance(got, p.Samples) and np.unique(got.step).size == cap
        else:
            error = refused(msg)
            assert (error.code, error.field) == ("too_many", "step")
            assert f"{cap + 1} distinct steps" in error.message
