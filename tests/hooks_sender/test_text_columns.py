"""Sample text in trainer_hooks: `prompt` and `completion` through `log_samples`,
`log_rewards` and the reward recorder onto the wire; batches bounded by each sample's own text
size; a text too large for any message left out and named; `text_per_group` keeping the text
of only k samples per group (best, worst, both ends, random); the outbox's split of a refused
message halving the text too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hooks_sender.test_sender import offline, spooled
from trainer_hooks.rewards import RewardResult
from trainer_hooks.transport.batching import SampleBatcher, build_fields
from trainer_hooks.transport.samples import keep_per_group, make_chunk
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.texts import TextColumn


def chunk(n: int, **columns: Any) -> Any:
    problems: list[str] = []
    c = make_chunk(0, [f"s{i}" for i in range(n)], [i // 4 for i in range(n)],
                   np.arange(n, dtype=float), None, None, columns, 1.0, problems)
    return c, problems


def wire(fields: dict[str, Any]) -> p.Samples:
    msg = {"v": 1, "id": "m", "type": "samples", "run": "r", **fields}
    out = p.validate_message(p.decode_frame(p.encode_msgpack(msg), binary=True))
    assert isinstance(out, p.Samples)
    return out


def test_log_samples_sends_prompts_and_completions_with_their_samples(tmp_path: Path) -> None:
    client = offline(tmp_path)
    client.log_samples(3, sample_id=["a", "b", "c"], group_id="g", reward=[1.0, 0.0, 0.5],
                       prompt="the same prompt", completion=["yes", None, "ünïcode ✓\n"])
    assert client.sync()  # seals the batch
    client.log_samples(4, sample_id=["d"], group_id="g", reward=[1.0])  # no text
    assert client.sync()
    first, second = spooled(client)
    client.close(timeout=0.1)
    assert first["prompt"] == ["the same prompt"] * 3
    assert first["completion"] == ["yes", None, "ünïcode ✓\n"]
    assert "prompt" not in second and "completion" not in second
    got = wire({k: v for k, v in first.items() if k not in ("v", "id", "type", "run")})
    assert isinstance(got.completion, TextColumn)  # packed by the sender
    assert got.completion.values() == ["yes", None, "ünïcode ✓\n"]
    assert got.text_bytes == 3 * 15 + 3 + len("ünïcode ✓\n".encode())


def test_rewards_and_the_recorder_carry_text(tmp_path: Path) -> None:
    client = offline(tmp_path)
    client.log_rewards(0, [RewardResult(1.0, {}), RewardResult(0.0, {})], sample_id=[1, 2],
                       group_id=[0, 0], prompt=["p1", "p2"], completion=["c1", "c2"])
    assert client.sync()
    rec = client.reward_recorder(env="math", step=1)
    rec.record(RewardResult(0.5, {"ok": 1.0}), sample_id="x", group_id="g", prompt="question")
    rec.annotate(["x"], completion=["answer"], advantage=0.0)
    rec.flush()
    assert client.sync()
    rewards, recorded = spooled(client)
    client.close(timeout=0.1)
    assert (rewards["prompt"], rewards["completion"]) == (["p1", "p2"], ["c1", "c2"])
    assert (recorded["prompt"], recorded["completion"]) == (["question"], ["answer"])


def test_a_bad_text_column_is_left_out_and_the_samples_still_sent(tmp_path: Path) -> None:
    client = offline(tmp_path)
    client.log_samples(0, sample_id=[1, 2], group_id=0, reward=[1, 0], prompt=[1, 2],
                       completion=["ok", "fine"])
    assert client.sync()
    [sent] = spooled(client)
    client.close(timeout=0.1)
    assert "prompt" not in sent and sent["completion"] == ["ok", "fine"]
    assert any("prompt" in r["why"] for r in client.not_stored)


def test_text_larger_than_a_message_may_carry_is_left_out_and_named() -> None:
    limit = p.DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE
    huge, fits = "x" * (limit + 1), "y" * (limit // 2)
    c, problems = chunk(3, prompt=["short", fits, "p"], completion=[huge, fits, "q" * 10])
    assert c.texts["completion"] == [None, fits, "q" * 10]
    assert c.texts["prompt"] == ["short", fits, "p"]
    assert len(problems) == 1 and "completion" in problems[0] and "1 sample" in problems[0]
    c, problems = chunk(1, prompt=[huge], completion=[huge])
    assert c.texts == {"prompt": [None], "completion": [None]} and len(problems) == 2


def test_text_that_is_not_valid_unicode_is_repaired_so_the_batch_encodes() -> None:
    c, problems = chunk(2, completion=["fine", "bad \ud800 half"])
    assert c.texts["completion"][1] == "bad ? half" and problems
    completion = wire(build_fields([c]).fields).completion
    assert isinstance(completion, TextColumn) and completion.values() == ["fine", "bad ? half"]


def test_batches_count_each_samples_own_text_size() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.choice([10, 60_000], size=200, p=[0.8, 0.2])
    c, _ = chunk(200, completion=["z" * int(k) for k in sizes])
    max_bytes = 256 * 1024
    batcher = SampleBatcher(max_samples=4096, max_bytes=max_bytes)
    sealed = batcher.add(c, now=0.0) + [batcher.seal()]
    assert sum(b.n for b in sealed) == 200
    sent = [s for b in sealed for s in b.fields["completion"]]
    assert sent == ["z" * int(k) for k in sizes]  # nothing lost or reordered
    for b in sealed:
        encoded = len(p.encode_msgpack({"type": "samples", **b.fields}))
        assert encoded <= max_bytes * 1.05 or b.n == 1, (encoded, b.n)
    assert len(sealed) >= int(sizes.sum()) // max_bytes  # not one batch per uniform estimate

    # The text of one batch stays under the server's limit, whatever max_bytes is.
    big, _ = chunk(10, completion=["w" * 3000] * 10)
    batcher = SampleBatcher(max_samples=4096, max_bytes=1 << 30, max_text_bytes=10_000)
    sealed = batcher.add(big, now=0.0) + [batcher.seal()]
    assert [b.n for b in sealed] == [3, 3, 3, 1]


def test_parts_of_a_chunk_carry_their_own_text() -> None:
    c, _ = chunk(4, prompt=["a" * 100, "b", "c", "d" * 50])
    head, tail = c.part(0, 1), c.part(1, 4)
    assert head.texts["prompt"] == ["a" * 100] and tail.texts["prompt"] == ["b", "c", "d" * 50]
    assert head.nbytes + tail.nbytes == pytest.approx(c.nbytes, abs=2)
    assert head.nbytes > c.nbytes // 4 + 60  # the long prompt weighs in its part, not a quarter
    kept = c.take(np.array([True, False, False, True]))
    assert kept.texts["prompt"] == ["a" * 100, "d" * 50]


GROUPS = ["g1"] * 4 + ["g2"] * 4 + ["g3"] * 2
REWARD = np.array([0.1, 0.9, 0.5, np.nan, 3.0, 1.0, 2.0, 0.0, 5.0, 5.0])


@pytest.mark.parametrize(("pick", "kept"), [
    ("best", [1, 2, 4, 6, 8, 9]),
    ("worst", [0, 2, 5, 7, 8, 9]),
    ("best_worst", [0, 1, 4, 7, 8, 9]),  # ties: the best end and the worst are two samples
])
def test_k_per_group_keeps_the_chosen_ends(pick: str, kept: list[int]) -> None:
    assert np.flatnonzero(keep_per_group(REWARD, GROUPS, 2, pick)).tolist() == kept


def test_k_per_group_at_random_keeps_k_of_each_group() -> None:
    keep = keep_per_group(REWARD, GROUPS, 3, "random")
    assert [int(keep[[g == name for g in GROUPS]].sum()) for name in ("g1", "g2", "g3")] == [
        3, 3, 2]
    assert keep_per_group(REWARD, GROUPS, 1, "best_worst").sum() == 3  # ⌈1/2⌉ best only


def test_the_text_per_group_option_applies_on_the_sender(tmp_path: Path) -> None:
    client = offline(tmp_path, text_per_group=2, text_pick="best")
    ids = list(range(10))
    client.log_samples(0, sample_id=ids, group_id=GROUPS, reward=REWARD.tolist(),
                       prompt=[f"p{i}" for i in ids], completion=[f"c{i}" for i in ids])
    assert client.sync()
    client.log_rewards(1, [RewardResult(float(r), {}) for r in REWARD], sample_id=ids,
                       group_id=GROUPS, completion=[f"r{i}" for i in ids])
    assert client.sync()
    samples, rewards = spooled(client)
    client.close(timeout=0.1)
    with_text = [i for i in ids if samples["completion"][i] is not None]
    assert with_text == [1, 2, 4, 6, 8, 9]
    assert [samples["prompt"][i] is not None for i in ids] == [i in with_text for i in ids]
    assert samples["reward"][0] == 0.1  # numbers of the others still sent
    assert [i for i in ids if rewards["completion"][i] is not None] == [1, 2, 4, 6, 8, 9]


def test_bad_text_options_are_setup_mistakes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="text_pick"):
        offline(tmp_path, text_pick="longest")
    with pytest.raises(ValueError, match="text_per_group"):
        offline(tmp_path, text_per_group=-1)


def test_a_refused_message_is_split_with_its_text() -> None:
    msg = {"v": 1, "id": "m", "type": "samples", "run": "r", "step": 0,
           "sample_id": [1, 2, 3], "group_id": [0, 0, 0], "reward": [1, 2, 3],
           "prompt": ["a", "b", "c"], "completion": ["x", None, "z"]}
    # as the sender does it: its outbox holds the message packed; decoded, split, re-encoded
    halves = p.split(p.decode(p.encode_msgpack(msg), "msgpack"))
    assert halves is not None
    assert [h["prompt"] for h in halves] == [["a"], ["b", "c"]]
    assert [h["completion"] for h in halves] == [["x"], [None, "z"]]
    for half in halves:
        got = p.validate_message(p.decode_frame(p.encode_msgpack(half), binary=True))
        assert isinstance(got, p.Samples) and isinstance(got.prompt, TextColumn)
        assert got.prompt.values() == half["prompt"]
