"""The trainer client alone, as a training machine gets it: the README's install line for it
(`pip install "./clients/python[hf]"`, with constraints/dev.txt's versions, this machine's
CPU torch among them) into a fresh venv, with no Node on PATH. Django, the server's packages
and the checkout must not be in that venv; the README's TRL example, run there for real
against a live server, must land in it whole: every step's reward and every scored sample;
its command, `telescope-sync`, runs there.

Slow (pip, then a real GRPOTrainer on CPU): marker `client_install`, CI's first pass only."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import ROOT, LiveServer
from tests.integrations.support import Catalog, run_named
from tests.integrations.test_trl import MISSING, server  # noqa: F401 (its fixture)

pytestmark = [pytest.mark.client_install, pytest.mark.timeout(600),
              pytest.mark.skipif(bool(MISSING), reason="the tiny model is built with the hf "
                                 "extra of this venv: pip install -e '.[hf]'")]

README = (ROOT / "README.md").read_text()
INSTALL = 'pip install "./clients/python[hf]"'  # the README's line for a training machine
CONSTRAINTS = "constraints/dev.txt"
STEPS, BATCH, GENERATIONS = 3, 8, 4
SERVER_ONLY = ("django", "channels", "daphne", "ingest", "telescope_ui")

# What the README's fragment leaves to the user: a model (the tests' tiny local Llama), its
# arguments, a dataset, two reward functions and a token. It runs as the README writes it.
PREAMBLE = """\
import json, os, sys
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

model, token, out = sys.argv[1], os.environ["TOKEN"], sys.argv[2]
steps, batch, generations = map(int, sys.argv[3:6])
dataset = Dataset.from_dict({"prompt": [f"{x} plus {y} is" for x in range(4) for y in range(4)]})
CONFIG = dict(output_dir=out + "/trainer", per_device_train_batch_size=batch,
              num_generations=generations, max_completion_length=6, max_steps=steps,
              logging_steps=1, report_to=["none"], use_cpu=True, save_strategy="no",
              learning_rate=1e-3, seed=0, disable_tqdm=True)

def accuracy(completions, **kwargs):
    return [float(min(sum(w.isdigit() for w in c.split()), 3)) for c in completions]

def format_reward(completions, **kwargs):
    return [0.5 if len(c.split()) <= 3 else 0.0 for c in completions]

"""
EPILOGUE = """
[callback] = [c for c in trainer.callback_handler.callbacks if isinstance(c, TelescopeCallback)]
with open(out + "/result.json", "w") as f:
    json.dump({"closed": callback.closed, "log_history": trainer.state.log_history}, f)
"""


def readme_trl_example(url: str) -> str:
    """The README's "Use it with TRL" code, pointed at `url`, its GRPOConfig(...) filled in."""
    section = README.split("## Use it with TRL", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "README.md: no python block under 'Use it with TRL'"
    text = code[1]
    assert '"ws://127.0.0.1:8000"' in text and "GRPOConfig(...)" in text, text
    return PREAMBLE + text.replace('"ws://127.0.0.1:8000"', repr(url)).replace(
        "GRPOConfig(...)", "GRPOConfig(**CONFIG)") + EPILOGUE


def no_node_env(bin_dir: Path, tmp: Path) -> dict[str, str]:
    """A training machine's environment: PATH is the venv's bin alone (node and npm live in
    /usr/bin here), no checkout on the path, no server settings."""
    drop = {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL",
            "TELESCOPE_DATA_DIR", "TELESCOPE_TEST_DB", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=str(bin_dir), HF_HOME=str(tmp / "hf"), HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               TELESCOPE_SPOOL_DIR=str(tmp / "spool"))
    assert shutil.which("node", path=env["PATH"]) is None
    assert shutil.which("npm", path=env["PATH"]) is None
    return env


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("client")
    root = tmp / "venv"
    venv.create(root, with_pip=True)
    env = no_node_env(root / "bin", tmp)
    assert INSTALL in README, f"README.md no longer says {INSTALL}"
    # The README's line, from the checkout's root, pinned to the tested versions; --no-compile
    # halves its time (byte-compiling all of torch and transformers; Python compiles what it
    # imports anyway).
    installed = subprocess.run([str(root / "bin" / "pip"), "install", "-q", "--no-compile",
                                "-c", CONSTRAINTS, *shlex.split(INSTALL)[2:]], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=420)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-4000:]
    return root, env


def venv_python(root: Path, env: dict[str, str], code: str, cwd: Path) -> str:
    done = subprocess.run([str(root / "bin" / "python"), "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_client_installs_without_node_or_the_server(
        client_venv: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = client_venv
    found = json.loads(venv_python(root, env, (
        "import importlib.metadata as m, importlib.util as u, json, trainer_hooks\n"
        f"print(json.dumps({{'missing': [n for n in {SERVER_ONLY!r} if u.find_spec(n) is None],"
        " 'hooks': trainer_hooks.__file__, 'torch': m.version('torch'),"
        " 'dists': sorted(d.metadata['Name'].lower() for d in m.distributions())}))"), tmp_path))
    assert found["missing"] == list(SERVER_ONLY)  # no Django, no server code
    assert "telescope-dashboard" not in found["dists"]
    assert "telescope-trainer-hooks" in found["dists"]
    assert found["hooks"].startswith(str(root))  # the installed copy, not the checkout's
    assert found["torch"].startswith("2.13.0")  # constraints/dev.txt: the CPU build on disk
    # Its own command (the server's `telescope` is not there): what close() names.
    assert not (root / "bin" / "telescope").exists()
    (tmp_path / "spool").mkdir()
    synced = subprocess.run([str(root / "bin" / "telescope-sync"), "--spool",
                             str(tmp_path / "spool")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert synced.returncode == 0, synced.stderr[-3000:]
    assert synced.stdout.startswith(f"telescope sync: nothing to deliver in {tmp_path}/spool")


def test_the_readme_trl_example_runs_against_a_live_server(
        client_venv: tuple[Path, dict[str, str]],
        server: tuple[LiveServer, str],  # noqa: F811
        tmp_path: Path) -> None:
    root, env = client_venv
    live, token = server
    model = tmp_path / "model"
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                    "from tests.integrations.trl_job import build_model; "
                    "build_model(Path(sys.argv[1]))", str(model)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    script = tmp_path / "readme_trl.py"
    script.write_text(readme_trl_example(live.ws))
    done = subprocess.run([str(root / "bin" / "python"), str(script), str(model), str(tmp_path),
                           *map(str, (STEPS, BATCH, GENERATIONS))],
                          cwd=tmp_path, env={**env, "TOKEN": token}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    result: dict[str, Any] = json.loads((tmp_path / "result.json").read_text())
    assert result["closed"] is True, "close() did not confirm everything stored and aggregated"

    run = run_named(live, "grpo-math")
    assert run["status"] == "finished" and run["last_step"] == STEPS
    catalog = Catalog(live, run["id"])
    logged = {int(h["step"]): h["reward"] for h in result["log_history"] if "reward" in h}
    assert sorted(logged) == list(range(1, STEPS + 1))
    stored = catalog.values("step", "train/reward_mean")
    assert stored == pytest.approx(logged)  # TRL's own reward, on its own step axis
    counts = catalog.values("reward", "reward", "count")
    assert counts == {step: BATCH for step in logged}  # every scored completion a sample
    assert catalog.has("reward", "reward", "mean", "math")  # telescope_reward(env="math")
