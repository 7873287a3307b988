"""Names that cannot deceive (wire.schema.deceptive, the one rule): control, format and
invisible characters — bidi overrides and isolates, zero-width characters, line and paragraph
separators, C0 and C1 controls — are refused in every name, key, label and id, with an error
naming the field; ordinary non-ASCII names pass."""

from __future__ import annotations

from typing import Any

import pytest

from trainer_hooks.wire.protocol import ProtocolError, check_key, validate_message

DECEIVING = ["\u202e", "\u2066", "\u200b", "\u2028", "\u0085", "\u009b", "\x00", "\x1b",
             "\u00a0", "\ufeff"]
FINE = ["récompense", "日本語/損失", "loss 🚀", "a b"]


def samples(**over: Any) -> dict[str, Any]:
    msg = {"v": 1, "id": "m", "type": "samples", "run": "r", "step": 0,
           "sample_id": ["a", "b"], "group_id": [0, 0], "reward": [1.0, 0.0]}
    return {**msg, **over}


def places(bad: str) -> list[tuple[str, dict[str, Any]]]:
    """(the field the error must name, a message with `bad` in that field)."""
    evil = f"evil{bad}txt"
    step = {"v": 1, "id": "m", "type": "step", "run": "r", "step": 0, "metrics": {"x": 1.0}}
    return [
        ("run", {**step, "run": evil}),
        ("id", {**step, "id": evil}),
        ("incarnation", {**step, "incarnation": evil}),
        (f"metrics.{evil}", {**step, "metrics": {evil: 1.0}}),
        ("env", samples(env=evil)),
        ("env", samples(env=["ok", evil])),
        ("stop_reason", samples(stop_reason=[evil, "length"])),
        ("sample_id", samples(sample_id=["a", evil])),
        ("group_id", samples(group_id=[evil, "g"])),
        (f"metrics.{evil}", samples(metrics={evil: [1.0, 2.0]})),
        ("environments[0].name", {"v": 1, "id": "m", "type": "ranges", "run": "r",
                                  "environments": [{"name": evil}]}),
    ]


@pytest.mark.parametrize("bad", DECEIVING, ids=lambda c: f"U+{ord(c):04X}")
def test_a_deceiving_character_is_refused_everywhere_naming_the_field(bad: str) -> None:
    for field, msg in places(bad):
        with pytest.raises(ProtocolError) as err:
            validate_message(msg)
        assert err.value.field is not None and err.value.field.startswith(field.split(".")[0]), (
            field, err.value.field)
        assert f"U+{ord(bad):04X}" in err.value.message or (
            field == "incarnation" and "invisible" in err.value.message), err.value.message


@pytest.mark.parametrize("bad", DECEIVING, ids=lambda c: f"U+{ord(c):04X}")
def test_a_categorical_value_with_one_is_left_out_and_reported(bad: str) -> None:
    msg = validate_message({"v": 1, "id": "m", "type": "step", "run": "r", "step": 0,
                            "metrics": {"outcome": f"ok{bad}", "x": 1.0}})
    assert "outcome" in msg.left_out and msg.metrics == {"x": 1.0}


@pytest.mark.parametrize("name", FINE)
def test_ordinary_names_in_any_script_pass(name: str) -> None:
    assert check_key(name, "run") == name
    validate_message(samples(env=name, metrics={name: [1.0, 2.0]}, sample_id=[name, "b"]))


def test_the_trainer_checks_its_run_name_before_sending() -> None:
    from trainer_hooks import connect

    with pytest.raises(ValueError, match="U\\+202E"):
        connect("ws://127.0.0.1:9", "t", "evil\u202etxt.exe")
