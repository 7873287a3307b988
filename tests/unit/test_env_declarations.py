"""Environment declarations from Telescope's configs and classes as they are
(trainer_hooks.rewards.ranges): properties, unknown keys, numbers as strings, degenerate ranges,
the default weight."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ingest.core.ranges import EnvRanges
from ingest.pipeline.aggregate import aggregate_step
from tests.unit.test_aggregate import make_step
from trainer_hooks.rewards.ranges import config_entries, environment_declarations
from trainer_hooks.wire import protocol as p

# ---------------------------------------------------------------- classes shaped like Telescope's


class Environment:
    """Like telescope.environments.base.Environment: class-level defaults, and a `name`
    property that only the registry's instances can answer."""

    reward_min: float | None = None
    reward_max: float | None = None
    metrics_ranges: dict[str, dict[str, float | bool]] = {}

    def __init__(self, **kwargs: Any) -> None:
        self._name: str | None = None
        for key, value in kwargs.items():
            setattr(self, key, value)

    @property
    def name(self) -> str:
        if self._name is not None:
            return self._name
        raise ValueError("Environment name not set. Either override the `name` property or "
                         "load this environment via get_environment()")


class Rubric:
    def __init__(self) -> None:
        self.entries: list[tuple[str, float, float, bool]] = []

    def add_reward(self, name: str, range_min: float, range_max: float,
                   invert: bool = False) -> None:
        self.entries.append((name, range_min, range_max, invert))

    @property
    def metrics_ranges(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name, lo, hi, invert in self.entries:
            out[name] = {"min": lo, "max": hi, **({"invert": True} if invert else {})}
        return out


class CountdownEnvironment(Environment):
    """Like Telescope's: `metrics_ranges` is a property over the rubric made in __init__, the
    name is the base class's property (the registry names it after its folder)."""

    def __init__(self, dataset_name: str = "Jiayi-Pan/Countdown-Tasks-3to4",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dataset_name = dataset_name
        self.rubric = Rubric()
        self.rubric.add_reward("_format_reward", 0, 1)
        self.rubric.add_reward("_equation_reward", 0, 1)

    @property
    def metrics_ranges(self) -> dict[str, dict[str, Any]]:  # type: ignore[override]
        return self.rubric.metrics_ranges


class TelescopeCountdown(CountdownEnvironment):
    """The class where Telescope keeps it: telescope/environments/countdown/environment.py."""


TelescopeCountdown.__module__ = "telescope.environments.countdown.environment"


class MyCountdown(CountdownEnvironment):
    name = "countdown"  # a user's subclass naming itself


class I3CodeEnvironment(Environment):
    """Like Telescope's: needs a provider to be made, its `name` is a property of the
    instance, its `metrics_ranges` a class attribute."""

    metrics_ranges = {  # noqa: RUF012 - as Telescope declares it
        "passed": {"min": 0, "max": 1},
        "num_errors": {"min": 0, "max": 15, "invert": True},
        "generated_code_chars": {"min": 0, "max": 50000},
    }

    def __init__(self, provider: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if provider is None:
            raise ValueError("A sandbox provider is required for i3_code")
        self._provider_name = provider

    @property
    def name(self) -> str:
        return f"i3-code-{self._provider_name}"


I3_RANGES = {"passed": {"min": 0.0, "max": 1.0, "invert": False},
             "num_errors": {"min": 0.0, "max": 15.0, "invert": True},
             "generated_code_chars": {"min": 0.0, "max": 50000.0, "invert": False}}
COUNTDOWN_RANGES = {"_format_reward": {"min": 0.0, "max": 1.0, "invert": False},
                    "_equation_reward": {"min": 0.0, "max": 1.0, "invert": False}}


def test_a_metrics_ranges_property_of_a_class_is_read_from_an_instance() -> None:
    decls, problems = environment_declarations([MyCountdown])
    assert problems == []
    assert decls == [{"name": "countdown", "weight": 1.0, "metrics_ranges": COUNTDOWN_RANGES}]


def test_telescope_own_class_is_named_as_its_registry_names_it() -> None:
    decls, problems = environment_declarations([TelescopeCountdown])
    assert problems == []
    assert decls == [{"name": "countdown", "weight": 1.0, "metrics_ranges": COUNTDOWN_RANGES}]


def test_a_name_property_is_read_from_the_instance_the_user_passes() -> None:
    decls, problems = environment_declarations([I3CodeEnvironment(provider="daytona")])
    assert problems == []
    assert decls == [{"name": "i3-code-daytona", "weight": 1.0, "metrics_ranges": I3_RANGES}]


def test_a_class_whose_name_needs_arguments_is_left_out_never_named_after_itself(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "trainer_hooks.envconfig"):
        decls, problems = environment_declarations([I3CodeEnvironment, MyCountdown])
    assert [d["name"] for d in decls] == ["countdown"]
    assert len(problems) == 1
    assert "I3CodeEnvironment.name is a property" in problems[0]
    assert "sandbox provider is required" in problems[0] and "pass an instance" in problems[0]
    assert "I3CodeEnvironment.name" in caplog.text


def test_a_name_property_that_raises_leaves_the_entry_out_with_its_reason() -> None:
    decls, problems = environment_declarations([CountdownEnvironment])
    assert decls == []
    assert len(problems) == 1 and "CountdownEnvironment.name could not be read" in problems[0]
    assert "Environment name not set" in problems[0]
    named = CountdownEnvironment()
    named._name = "countdown"  # what Telescope's get_environment("countdown") does
    decls, problems = environment_declarations(named)
    assert problems == [] and decls == [{"name": "countdown", "weight": 1.0,
                                         "metrics_ranges": COUNTDOWN_RANGES}]


def test_an_attribute_that_is_no_mapping_is_a_problem_not_an_exception() -> None:
    class Odd:
        name = "odd"
        metrics_ranges = property(lambda self: ["not", "a", "mapping"])

    decls, problems = environment_declarations([Odd])
    assert decls == [{"name": "odd", "weight": 1.0}]
    assert len(problems) == 1 and "Odd.metrics_ranges is a list" in problems[0]


def test_telescope_run_config_and_its_class_merge(tmp_path: Path) -> None:
    """Telescope's configs/run.yaml as it is (other top-level keys, `kwargs`, quoted name)."""
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text(
        'model: "Qwen/Qwen2.5-3B"\n'
        "environments:\n"
        '  - name: "countdown"\n    weight: 1.0\n    reward_min: 0.0\n    reward_max: 2.0\n'
        "    kwargs:\n      add_thinking_prefix: true\n"
        "number_of_steps: 300\n")
    decls, problems = environment_declarations([str(run_yaml), TelescopeCountdown])
    assert problems == []
    assert decls == [{"name": "countdown", "weight": 1.0, "reward_min": 0.0, "reward_max": 2.0,
                      "metrics_ranges": COUNTDOWN_RANGES}]


# ---------------------------------------------------------------- config entries


def test_unknown_keys_are_named_with_the_closest_known_one_and_ignored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "envs.yaml"
    path.write_text("environments:\n"
                    "  - name: countdown\n    reward_minimum: 0\n    rewardmax: 2\n"
                    "    metrics_ranges:\n      correct: {min: 0, max: 1, inverted: true}\n")
    with caplog.at_level(logging.WARNING, "trainer_hooks.envconfig"):
        decls, problems = environment_declarations(str(path))
    assert problems == []  # the entry is kept, without the keys
    assert decls == [{"name": "countdown", "weight": 1.0,
                      "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0, "invert": False}}}]
    text = caplog.text
    assert "environments[0]: unknown key 'reward_minimum' ignored (did you mean 'reward_min'?)" \
        in text
    assert "unknown key 'rewardmax' ignored (did you mean 'reward_max'?)" in text
    assert "environments[0].metrics_ranges.correct: unknown key 'inverted'" in text
    assert "did you mean 'invert'?" in text


@pytest.mark.parametrize(("yaml_value", "expected"), [
    ('"2.0"', 2.0), ("'2.0'", 2.0), ("2e0", 2.0), ("2.0e+0", 2.0), ("2", 2.0), ("2.0", 2.0)])
def test_numbers_are_yaml_numbers_or_numeric_strings(tmp_path: Path, yaml_value: str,
                                                     expected: float) -> None:
    path = tmp_path / "envs.yaml"
    path.write_text(f"environments:\n  - name: a\n    reward_min: '0'\n"
                    f"    reward_max: {yaml_value}\n    weight: {yaml_value}\n"
                    f"    metrics_ranges: {{m: {{min: '0', max: {yaml_value}}}}}\n")
    decls, problems = environment_declarations(str(path))
    assert problems == []
    assert decls[0]["reward_max"] == expected and decls[0]["weight"] == expected
    assert decls[0]["reward_min"] == 0.0 and decls[0]["metrics_ranges"]["m"]["max"] == expected


def test_a_string_that_is_no_number_is_still_refused_naming_the_field() -> None:
    decls, problems = environment_declarations([{"name": "a", "reward_max": "high"}])
    assert decls == [] and len(problems) == 1 and "reward_max" in problems[0]


def test_equal_bounds_are_a_degenerate_range_and_max_below_min_is_refused() -> None:
    decls, problems = environment_declarations([
        {"name": "flat", "reward_min": 1, "reward_max": 1,
         "metrics_ranges": {"m": {"min": 3, "max": 3}}},
        {"name": "upside_down", "reward_min": 2, "reward_max": 1}])
    assert [d["name"] for d in decls] == ["flat"]
    assert decls[0]["reward_min"] == decls[0]["reward_max"] == 1.0
    assert len(problems) == 1 and "upside_down" in problems[0] and "reward_max" in problems[0]
    # the server's validator is the same one
    p.parse_environments([{"name": "flat", "reward_min": 1, "reward_max": 1}], "environments")


def test_a_missing_weight_is_one_and_a_given_weight_is_kept() -> None:
    decls, _ = environment_declarations([{"name": "a"}, {"name": "b", "weight": 0.25}])
    assert [d["weight"] for d in decls] == [1.0, 0.25]
    entries, warnings = config_entries([{"name": "a"}, {"name": "b", "weight": "0.5"}])
    assert warnings == [] and [e["weight"] for e in entries] == [1.0, 0.5]


def test_config_entries_leave_what_is_no_list_of_mappings_to_the_validator() -> None:
    assert config_entries({"name": "a"}) == ({"name": "a"}, [])
    entries, _ = config_entries(["a"])
    with pytest.raises(p.ProtocolError) as exc:
        p.parse_environments(entries, "environments")
    assert exc.value.field == "environments[0]"


def test_the_server_normalizes_a_declared_degenerate_range_to_one_half() -> None:
    """docs/statistics.md "Normalization": max = min maps every value to 0.5."""
    decl = p.parse_environments([{"name": "flat", "reward_min": 1, "reward_max": 1}],
                                "environments")[0]
    assert (decl.reward_min, decl.reward_max) == (1.0, 1.0)
    s = make_step([0.0, 1.0, 3.0], env=[0, 0, 0], env_names=["flat"])
    out = aggregate_step(s, {"flat": EnvRanges(decl.reward_min, decl.reward_max)}, {})
    assert out[("reward", "reward", "norm:mean", "flat")] == 0.5
    assert out[("reward", "reward", "norm:min", "flat")] == 0.5
    assert out[("reward", "reward", "norm:max", "flat")] == 0.5
