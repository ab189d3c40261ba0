"""Critic training on several processes, run as users run it (issue 49): the README's "Critic
training on N processes" commands, parsed out of it, train on 2 CPU processes over gloo. Each
process trains on its own share of the steps one process at twice the batch takes, and ends at
that process's pair scores within float noise; a run SIGKILLed in its second epoch resumes to
the bytes of an unbroken one, and only on as many processes as it started on.

The runs start from MiniLM with dropout off (its masks are drawn per process, so with dropout two
processes train as one only in expectation), on groups of 10 mini questions: 7 to train on (an
odd number: the last step of an epoch leaves one process a stand-in) and 3 to validate on (two
batches, one a process, so the validation must be gathered)."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from robustkit.crossencoder import processes

README = Path(__file__).parents[1] / "README.md"
SECTION = "**Critic training on N processes**"
BATCH = 1  # groups a step on each of the 2 processes; the one-process run takes 2

# Loaded by every Python process of a run (PYTHONPATH): logs which groups each process's steps hold.
PROBE = """
import json, os
from robustkit.crossencoder import processes

real = processes.step_share

def step_share(groups, index, count):
    share = real(groups, index, count)
    with open(os.path.join(os.environ["SHARD_LOG"], f"process-{index}.jsonl"), "a") as log:
        log.write(json.dumps([item["input_ids"][0] for item in share]) + "\\n")
    return share

processes.step_share = step_share
"""


def readme_commands() -> dict[str, list[str]]:
    """The section's commands by launcher: ``torchrun``, ``accelerate`` and ``python``."""
    text = README.read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(SECTION):], re.S).group(1)
    commands = [shlex.split(line) for line in block.splitlines() if line.strip()]
    return {command[0]: command for command in commands}


def test_the_readme_commands_train_one_global_batch():
    commands = readme_commands()
    assert sorted(commands) == ["accelerate", "python", "torchrun"]
    assert commands["torchrun"][:4] == ["torchrun", "--standalone", "--nproc_per_node", "2"]
    assert commands["accelerate"][:5] == ["accelerate", "launch", "--multi_gpu", "--num_processes", "2"]
    for command in commands.values():
        assert command[command.index("-m"):][:3] == ["-m", "robustkit.corm", "train"]

    def batch(command):
        return int(command[command.index("--batch-groups") + 1])

    assert batch(commands["python"]) == 2 * batch(commands["torchrun"]) == 2 * batch(commands["accelerate"])


@pytest.mark.parametrize("steps,count", [(8, 2), (7, 2), (1, 2), (5, 3), (4, 1)])
def test_a_steps_shares_are_contiguous_runs_that_cover_it(steps, count):
    groups = list(range(steps))
    shares = [processes.step_share(groups, index, count) for index in range(count)]
    assert sum(shares, []) == groups
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert [len(share) for share in shares] == sorted(map(len, shares), reverse=True)


@pytest.mark.parametrize("env,accelerator,words", [
    ({"WORLD_SIZE": "2"}, 1, ["2 processes were launched (WORLD_SIZE=2) but Accelerate set up 1"]),
    ({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1"}, 1,
     ["accelerate launch --cpu was asked for several processes", "starts more only under MPI"]),
], ids=["fewer than launched", "accelerate launch --cpu"])
def test_a_launch_that_starts_too_few_processes_is_refused_naming_the_fix(env, accelerator, words, monkeypatch):
    for name in ("WORLD_SIZE", "ACCELERATE_USE_CPU", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as refused:
        processes.check_launch(SimpleNamespace(num_processes=accelerator, distributed_type="NO"))
    for word in [*words, "torchrun --standalone --nproc_per_node", "accelerate launch --multi_gpu --num_processes"]:
        assert word in str(refused.value)
    monkeypatch.delenv("MASTER_ADDR", raising=False)  # `accelerate launch --cpu` of one process sets none
    monkeypatch.setenv("WORLD_SIZE", "1")
    processes.check_launch(SimpleNamespace(num_processes=1, distributed_type="NO"))


# --- the README's commands, run ------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The training and validation groups, a dropout-free MiniLM cross-encoder to start from and the probe."""
    import torch

    from robustkit.crossencoder.groups import alias_groups
    from robustkit.crossencoder.model import CrossEncoder
    from robustkit.data import mini_corpus, mini_questions
    from robustkit.models import resolve_model

    root = tmp_path_factory.mktemp("processes")
    questions, corpus = mini_questions()[:10], mini_corpus()
    candidates = [[p for p in (f"p-{q.id}-{kind}" for kind in ("g", "fp", "cb", "dx")) if p in corpus]
                  for q in questions]
    groups, _ = alias_groups([{"id": q.id, "text": q.text, "answers": q.answers} for q in questions],
                             candidates, {p.id: p.text for p in corpus}, n_negatives=3)
    for name, rows in (("groups.jsonl", groups[:7]), ("val.jsonl", groups[7:])):
        (root / name).write_text("".join(json.dumps(group) + "\n" for group in rows))
    torch.manual_seed(0)
    init = CrossEncoder(resolve_model("critic_init", "tiny", verbose=False).path, dropout=0.0, max_length=32)
    init.encoder.config.hidden_dropout_prob = init.encoder.config.attention_probs_dropout_prob = 0.0
    init.save(root / "init")
    (root / "probe").mkdir()
    (root / "probe" / "sitecustomize.py").write_text(PROBE)
    return root


def command(launcher: str, files: Path, out: Path, batch_groups: int) -> list[str]:
    """The README's command for ``launcher`` as written, on this test's files and batch, with
    validation groups of its own (two batches), 2 epochs and 32 tokens a pair."""
    args = readme_commands()[launcher]
    for flag, value in (("--groups", files / "groups.jsonl"), ("--init", files / "init"), ("--out", out),
                        ("--batch-groups", batch_groups)):
        args[args.index(flag) + 1] = str(value)
    program = sys.executable if launcher == "python" else str(Path(sys.executable).with_name(launcher))
    return [program, *args[1:], "--val-groups", str(files / "val.jsonl"), "--epochs", "2", "--max-length", "32"]


def environment(files: Path, out: Path) -> dict:
    """One thread a process (as torchrun sets it: two processes share the 2 cores), the probe
    logging into ``out``'s sibling folder. Where Python runs without writing bytecode
    (PYTHONDONTWRITEBYTECODE), every process would compile torch and transformers afresh (20 s
    each on 2 cores): the runs keep theirs in the test's folder instead."""
    shards = out.with_name(out.name + "-shards")
    shards.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(files / "probe"), os.environ.get("PYTHONPATH", "")]),
           "SHARD_LOG": str(shards), "OMP_NUM_THREADS": "1", "ROBUSTKIT_PROGRESS": "0"}
    if env.pop("PYTHONDONTWRITEBYTECODE", None):
        env["PYTHONPYCACHEPREFIX"] = str(files / "bytecode")
    return env


def run(launcher: str, files: Path, out: Path, batch_groups: int) -> subprocess.CompletedProcess:
    done = subprocess.run(command(launcher, files, out, batch_groups), env=environment(files, out),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def unbroken(files):
    """The README's accelerate launch on 2 processes, and its one-process command at twice the batch."""
    return {"two": run("accelerate", files, files / "two", BATCH), "one": run("python", files, files / "one", 2 * BATCH)}


def shard_log(out: Path, index: int) -> list[list[tuple]]:
    lines = (out.with_name(out.name + "-shards") / f"process-{index}.jsonl").read_text().splitlines()
    return [[tuple(ids) for ids in json.loads(line)] for line in lines]


def pair_scores(folder: Path, groups_file: Path):
    """σ(logit) of every (query, passage) pair of the groups, by the model in ``folder``."""
    from robustkit.crossencoder.model import CrossEncoderScorer

    groups = [json.loads(line) for line in groups_file.read_text().splitlines()]
    pairs = [(g["query"], doc) for g in groups for doc in g["docs"]]
    return CrossEncoderScorer(folder, cache=False).score(*zip(*pairs))


@pytest.mark.slow
def test_each_process_trains_on_its_own_share_of_one_process_steps(files, unbroken):
    first, second, one = shard_log(files / "two", 0), shard_log(files / "two", 1), shard_log(files / "one", 0)
    assert len(first) == len(second) == len(one) == 2 * 4  # 2 epochs of 7 groups, 2 a step
    for mine, other, whole in zip(first, second, one):
        assert mine + other == whole  # the one process's step, split between the two in order
        assert mine and not set(mine) & set(other)
    assert [len(share) for share in second].count(0) == 2  # each epoch's last step: process 1 runs a stand-in
    assert "training on 2 processes (MULTI_CPU over gloo): an effective batch of 2 groups" in unbroken["two"].stdout


@pytest.mark.slow
def test_two_processes_train_as_one_process_at_twice_the_batch(files, unbroken):
    import numpy as np
    import torch

    two, one = files / "two", files / "one"
    start, scores_two, scores_one = (pair_scores(folder, files / "groups.jsonl")
                                     for folder in (files / "init", two / "model", one / "model"))
    np.testing.assert_allclose(scores_two, scores_one, rtol=0, atol=1e-6)
    assert np.abs(scores_one - start).max() > 1e-3  # training moved them a thousand times further
    rows_two, rows_one = ([json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
                          for out in (two, one))
    assert [row["id"] for row in rows_two] == [row["id"] for row in rows_one]
    for a, b in zip(rows_two, rows_one):  # the steps' losses, summed over the processes; the whole validation
        assert {k: v for k, v in a.items() if k not in ("loss", "ndcg@3", "mrr")} == \
            {k: v for k, v in b.items() if k not in ("loss", "ndcg@3", "mrr")}
        for metric in {"loss", "ndcg@3", "mrr"} & set(b):
            assert a[metric] == pytest.approx(b[metric], rel=1e-5)
    # after the first epoch: the optimizer's moments (the gradients' scale) and the learning rate
    state_two, state_one = (torch.load(out / "checkpoints" / "epoch-0" / "optimizer.bin", weights_only=False)["state"]
                            for out in (two, one))
    for moment in ("exp_avg", "exp_avg_sq"):  # over all weights: some (attention's key biases) get only float noise
        a, b = (torch.cat([state[key][moment].flatten() for key in sorted(state)]) for state in (state_two, state_one))
        assert torch.linalg.norm(a - b) <= 1e-4 * torch.linalg.norm(b), moment
    lr_two, lr_one = (torch.load(out / "checkpoints" / "epoch-0" / "scheduler.bin", weights_only=False)["_last_lr"]
                      for out in (two, one))
    assert lr_two == lr_one
    recorded = {"processes": 2, "batch_groups": BATCH, "grad_accum": 1, "effective_batch_groups": 2 * BATCH}
    assert json.loads((two / "model" / "training.json").read_text()) == recorded
    assert json.loads((two / "summary.json").read_text()).items() >= recorded.items()
    assert not (one / "model" / "training.json").exists()  # one process's model folder is as it always was
    assert json.loads((one / "summary.json").read_text())["processes"] == 1


@pytest.mark.slow
def test_a_run_killed_in_its_second_epoch_resumes_on_as_many_processes_to_the_same_bytes(files, unbroken):
    out = files / "killed"
    log = files / "killed.log"
    with open(log, "w") as stderr, subprocess.Popen(command("torchrun", files, out, BATCH), stdout=stderr,
                                                    stderr=stderr, env=environment(files, out),
                                                    start_new_session=True) as killed:
        shards = out.with_name(out.name + "-shards") / "process-0.jsonl"
        # the first epoch's checkpoint in place and the second epoch's second step fetched: 4 + 2 steps
        while not ((out / "checkpoints" / "epoch-0").exists() and len(shards.read_text().splitlines()) >= 6):
            assert killed.poll() is None, log.read_text()[-3000:]
            time.sleep(0.05)
        os.killpg(killed.pid, signal.SIGKILL)  # the launcher and both processes, as a preempted machine
    assert not (out / "model").exists(), "the run ended before it was killed"
    checkpoint = out / "checkpoints" / "epoch-0"
    assert json.loads((checkpoint / "processes.json").read_text()) == {"processes": 2}
    assert {p.name for p in checkpoint.glob("random_states_*.pkl")} == {"random_states_0.pkl", "random_states_1.pkl"}

    refused = subprocess.run(command("python", files, out, 2 * BATCH), capture_output=True, text=True,
                             env=environment(files, out.with_name("refused")))
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"{checkpoint} was saved by 2 process(es) and this run has 1" in refused.stderr
    assert "torchrun --standalone --nproc_per_node 2" in refused.stderr and "Traceback" not in refused.stderr

    done = subprocess.run(command("torchrun", files, out, BATCH), env=environment(files, out.with_name("again")),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    unbroken_model = files / "two" / "model"
    saved = sorted(p.relative_to(unbroken_model) for p in unbroken_model.rglob("*") if p.is_file())
    assert saved == sorted(p.relative_to(out / "model") for p in (out / "model").rglob("*") if p.is_file())
    for name in saved:  # weights, head, history, training.json: torchrun resumed = accelerate launch unbroken
        assert (out / "model" / name).read_bytes() == (unbroken_model / name).read_bytes(), f"{name} differs"
