"""createtoken and declare_ranges (docs/protocol.md "Commands")."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from ingest.models import Environment, Project, Run, Token
from ingest.write.auth import digest, project_for_token

pytestmark = pytest.mark.django_db(transaction=True)


def run_command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_createtoken_prints_a_working_token_last_and_stores_only_its_hash() -> None:
    token = run_command("createtoken", "--project", "alpha").strip().splitlines()[-1]
    project = Project.objects.get(name="alpha")
    assert project_for_token(token) == project.pk
    stored = Token.objects.get(project=project)
    assert stored.digest == digest(token) and token not in (stored.digest, stored.prefix)
    second = run_command("createtoken", "--project", "alpha").strip().splitlines()[-1]
    assert second != token and Project.objects.filter(name="alpha").count() == 1


@pytest.fixture
def run() -> Run:
    project = Project.objects.create(name="p")
    return Run.objects.create(project=project, name="r", started_at="2026-01-01T00:00Z",
                              updated_at="2026-01-01T00:00Z")


def test_declare_ranges_applies_the_yaml_environments(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "envs.yaml"
    path.write_text("""
environments:
  - name: countdown
    weight: 0.5
    reward_min: 0.0
    reward_max: 2.0
    metrics_ranges:
      correct: {min: 0.0, max: 1.0}
      reasoning_steps: {min: 0, max: 20, invert: true}
  - name: math
    reward_min: 0
    reward_max: 1
""")
    out = run_command("declare_ranges", "--project", "p", "--run", "r", str(path))
    assert "countdown, math" in out
    envs = {e.name: e for e in Environment.objects.filter(run=run)}
    assert (envs["countdown"].reward_min, envs["countdown"].reward_max) == (0.0, 2.0)
    assert envs["countdown"].metrics_ranges["reasoning_steps"] == {"min": 0, "max": 20,
                                                                   "invert": True}
    path.write_text("environments:\n  - name: math\n    reward_max: 5\n")
    run_command("declare_ranges", "--project", "p", "--run", "r", str(path))
    assert list(Environment.objects.filter(run=run).values_list("name", "reward_max")) == [
        ("math", 5.0)]


@pytest.mark.parametrize(("text", "message"), [
    ("environments: [{name: a, reward_min: 2, reward_max: 1}]", "environments[0].reward_max"),
    ("environments: [{name: a, reward_max: 'high'}]", "environments[0].reward_max"),
    ("environments: [{name: a, metrics_ranges: {m: {min: low}}}]",
     "environments[0].metrics_ranges.m.min"),
    ("environments: [{weight: 1}]", "environments[0].name"),
    ("something_else: 1", "no top-level 'environments:'"),
    ("environments: [", "not valid YAML"),
])
def test_declare_ranges_names_the_bad_field(run: Run, tmp_path: Path, text: str,
                                            message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CommandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_command("declare_ranges", "--project", "p", "--run", "r", str(path))
    assert not Environment.objects.exists()


def run_command_err(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


TYPOS = """
environments:
  - name: countdown
    reward_minimum: 0
    rewardmax: 2
    metrics_ranges:
      correct: {min: 0, max: 1, inverse: true}
"""


def test_declare_ranges_names_unknown_keys_and_strict_refuses_them(run: Run,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "typos.yaml"
    path.write_text(TYPOS)
    with pytest.raises(CommandError) as exc:
        run_command("declare_ranges", "--strict", "--project", "p", "--run", "r", str(path))
    text = str(exc.value)
    # Errors, each naming the file and the key; none says "ignored" (nothing was declared).
    assert f"{path}: environments[0]: unknown key 'reward_minimum' is an error with --strict " \
        "(did you mean 'reward_min'?)" in text
    assert f"{path}: environments[0]: unknown key 'rewardmax' is an error" in text
    assert f"{path}: environments[0].metrics_ranges.correct: unknown key 'inverse' is an " \
        "error with --strict (did you mean 'invert'?)" in text
    assert "ignored" not in text
    assert not Environment.objects.exists()
    out, err = run_command_err("declare_ranges", "--project", "p", "--run", "r", str(path))
    assert f"warning: {path}: environments[0]: unknown key 'reward_minimum' ignored (did you " \
        "mean 'reward_min'?)" in err
    assert "unknown key 'rewardmax' ignored" in err and "is an error" not in err
    assert "Declared 1 environment(s)" in out
    env = Environment.objects.get(run=run)
    assert (env.reward_min, env.reward_max) == (None, None)  # the typos declared nothing
    assert env.metrics_ranges == {"correct": {"min": 0.0, "max": 1.0, "invert": False}}


def test_declare_ranges_reads_telescope_configs_as_they_are(run: Run, tmp_path: Path) -> None:
    """Telescope's run config (its other keys, `kwargs`, quoted and string numbers, no
    weight) and an equal reward_min and reward_max (a degenerate range)."""
    path = tmp_path / "run.yaml"
    path.write_text("""
model: "Qwen/Qwen2.5-3B"
environments:
  - name: "countdown"
    reward_min: "0.0"
    reward_max: 2e0
    kwargs:
      add_thinking_prefix: true
  - name: "flat"
    weight: '0.5'
    reward_min: 1
    reward_max: 1
    metrics_ranges:
      steps: {min: "0", max: 2e1, invert: true}
number_of_steps: 300
""")
    out, err = run_command_err("declare_ranges", "--strict", "--project", "p", "--run", "r",
                               str(path))
    assert err == "" and "countdown, flat" in out
    envs = {e.name: e for e in Environment.objects.filter(run=run)}
    assert (envs["countdown"].weight, envs["countdown"].reward_min,
            envs["countdown"].reward_max) == (1.0, 0.0, 2.0)
    assert (envs["flat"].weight, envs["flat"].reward_min, envs["flat"].reward_max) == (
        0.5, 1.0, 1.0)
    assert envs["flat"].metrics_ranges == {"steps": {"min": 0.0, "max": 20.0, "invert": True}}


def test_declare_ranges_needs_an_existing_run(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "envs.yaml"
    path.write_text("environments: []\n")
    with pytest.raises(CommandError, match="no run 'nope'"):
        run_command("declare_ranges", "--project", "p", "--run", "nope", str(path))
