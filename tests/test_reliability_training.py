"""The cross-encoder's training, tried as a hostile user would (issue 35, second ring): groups it
cannot learn from are refused, naming the group, field and value, before any model loads or file
is written; a checkpoint torn by an older version or a lost file is set aside, and a run killed
with SIGKILL while writing one resumes to the same bytes as a run never interrupted."""
import json
import os
import signal
import subprocess
import sys

import pytest

from robustkit.corm.groups import build_groups
from robustkit.crossencoder import loop
from robustkit.crossencoder import train as training
from robustkit.crossencoder.groups import check_groups

NAN = float("nan")


def group(i=0, **changes):
    return {"question_id": f"q{i}", "query": f"who wrote book {i}?",
            "docs": [f"book {i} was written by author {i}.", f"book {i + 1} is a novel.", "rain."],
            "labels": [1.0, 0.0, 0.0]} | changes


GOOD = [group(i) for i in range(4)]

# (case, training groups, validation groups, words the message must contain)
BAD_GROUPS = [
    ("every label 0", [group(i, labels=[0.0, 0.0, 0.0]) for i in range(4)], GOOD,
     ["every label of every training group is 0", "teach the model nothing"]),
    ("a label above 1", [*GOOD, group(7, labels=[2.0, 0.0, 0.0])], GOOD,
     ["training group 4 (question_id 'q7')", "labels[0] = 2.0", "rescale"]),
    ("a negative label", [group(3, labels=[1.0, -1.0, 0.0])], GOOD,
     ["training group 0 (question_id 'q3')", "labels[1] = -1.0", "[0, 1]"]),
    ("a NaN label", [group(labels=[NAN, 0.0, 1.0])], GOOD, ["labels[0] = nan", "not a finite number"]),
    ("a label that is text", [group(labels=["1", 0.0, 0.0])], GOOD, ["labels[0] = '1'"]),
    ("a group without documents", [*GOOD, group(5, docs=[], labels=[])], GOOD,
     ["training group 4 (question_id 'q5')", "'docs' is empty"]),
    ("3 documents, 1 label", [group(2, labels=[1.0])], GOOD,
     ["(question_id 'q2')", "3 docs but 'labels' is [1.0]", "one label per passage"]),
    ("documents as one string", [group(docs="book 0.", labels=[1.0])], GOOD, ["'docs' must be a list", "'book 0.'"]),
    ("a group without labels", [{"question_id": "q0", "query": "who?", "docs": ["a"]}], GOOD,
     ["training group 0 (question_id 'q0')", "no field(s) ['labels']"]),
    ("an empty query", [group(query=" ")], GOOD, ["'query' must be non-empty text"]),
    ("a group that is not an object", ["who wrote book 0?"], GOOD, ["training group 0", "got str"]),
    ("no training groups", [], GOOD, ["no training groups"]),
    ("a bad validation group", GOOD, [group(9, labels=[1.0, 0.5, 1.5])],
     ["validation group 0 (question_id 'q9')", "labels[2] = 1.5"]),
    ("all-zero validation labels", GOOD, [group(labels=[0, 0, 0])], ["every label of every validation group is 0"]),
]


@pytest.mark.parametrize("case,groups,val,words", BAD_GROUPS, ids=[c[0] for c in BAD_GROUPS])
def test_bad_groups_are_refused_before_a_model_loads_or_a_file_is_written(case, groups, val, words,
                                                                          tmp_path, monkeypatch):
    def loaded(*args, **kwargs):
        raise AssertionError(f"{case}: work started before the bad groups were refused")

    monkeypatch.setattr(training, "CrossEncoder", loaded)
    monkeypatch.setattr("accelerate.Accelerator", loaded)
    with pytest.raises(ValueError) as raised:
        training.train(groups, val, init="/nonexistent/encoder", out_dir=tmp_path / "out", progress=False)
    for word in words:
        assert word in str(raised.value), f"{case}: {str(raised.value)!r} does not name {word!r}"
    assert not list(tmp_path.iterdir())


def test_groups_to_split_by_question_need_a_question_id():
    check_groups([{k: v for k, v in group().items() if k != "question_id"}])  # training alone needs none
    with pytest.raises(ValueError, match="training group 0: no 'question_id': the split .* add it"):
        check_groups([{k: v for k, v in group().items() if k != "question_id"}], by_question=True)


@pytest.mark.parametrize("rows,words", [
    ([{k: v for k, v in group(i).items() if k != "question_id"} for i in range(4)],
     ["training group 0: no 'question_id'", "give validation groups of your own"]),
    ([group(i, labels=[0, 0, 0]) for i in range(4)], ["every label of every training group is 0"]),
    ([*GOOD, group(4, labels=[2.0, 0, 0])], ["training group 4 (question_id 'q4')", "labels[0] = 2.0"]),
], ids=["no question_id", "every label 0", "a label of 2"])
def test_cli_refuses_bad_groups_with_status_2_and_no_traceback(rows, words, tmp_path):
    groups = tmp_path / "groups.jsonl"
    groups.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = subprocess.run([sys.executable, "-m", "robustkit.corm", "train", "--groups", str(groups),
                          "--init", "/nonexistent/encoder", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"python -m robustkit.corm: error: {groups}: ")
    assert all(word in out.stderr for word in words), out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "out").exists()


LABELS = [{"question_id": "q1", "doc_id": d, "in_clean_pool": d in "ab", "perturbed_k": [0, 1],
           "outcomes": outcomes} for d, outcomes in zip("abc", ([1, 1], [0, 1], [0, 0]))]
PERTURBATIONS = [{"question_id": "q1", "k": k, "type": "false_premise", "text": f"q1 biased {k}"} for k in (0, 1)]
TEXTS = {d: f"passage {d}" for d in "abc"}


@pytest.mark.parametrize("k_prime", [0, -1, 1.5, True])
def test_k_prime_0_is_refused_not_read_as_all(k_prime):
    with pytest.raises(ValueError, match=rf"K' must be in 1..2, got k_prime={k_prime!r}: .* None for all"):
        build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=1, k_prime=k_prime)
    assert build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=1, k_prime=None) \
        == build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=1, k_prime=2)


# --- torn or killed checkpoints: the same bytes ----------------------------------------------------

# three epochs, so that a run can be killed with one checkpoint behind it and another being written;
# one step an epoch still restores optimizer, schedule and dropout's random state
KNOBS = dict(epochs=3, batch_groups=2, max_length=32, seed=1, progress=False)
TRAIN, VAL = [group(i) for i in range(2)], [group(2)]


@pytest.fixture(scope="module")
def init():
    from robustkit.models import resolve_model

    return resolve_model("critic_init", "tiny", verbose=False).path


@pytest.fixture(scope="module")
def whole(init, tmp_path_factory):
    """A run never interrupted: the bytes every resumed run must end in."""
    out = tmp_path_factory.mktemp("whole")
    training.train(TRAIN, VAL, init=init, out_dir=out, **KNOBS)
    return out


def assert_same_model(a, b):
    """The saved models (weights, head, tokenizer, config, history) are byte for byte the same."""
    files = sorted(p.relative_to(a / "model") for p in (a / "model").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b / "model") for p in (b / "model").rglob("*") if p.is_file())
    assert "encoder/model.safetensors" in map(str, files) and "head.pt" in map(str, files)
    for name in files:
        assert (a / "model" / name).read_bytes() == (b / "model" / name).read_bytes(), f"{name} differs"


def stop_in_epoch(monkeypatch, n: int):
    """Ctrl-C in the n-th epoch's validation, after the epochs before it left their checkpoints."""
    real, calls = training.evaluate, [0]

    def evaluate(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "evaluate", evaluate)


@pytest.mark.slow
def test_a_checkpoint_without_weights_is_set_aside_and_training_starts_over(init, whole, tmp_path,
                                                                            monkeypatch, capsys):
    with monkeypatch.context() as patch:
        stop_in_epoch(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            training.train(TRAIN, VAL, init=init, out_dir=tmp_path, **KNOBS)
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "epoch-0" / "model.safetensors").unlink()  # as a lost file, or an older version killed
    (checkpoints / "epoch-0.torn-1").mkdir()  # an earlier one set aside: the next number is taken
    capsys.readouterr()
    training.train(TRAIN, VAL, init=init, out_dir=tmp_path, **KNOBS)
    message = capsys.readouterr().out
    assert f"{checkpoints / 'epoch-0'}: an incomplete checkpoint (no model weights" in message
    assert "set aside as epoch-0.torn-2" in message and "resumes from the last complete checkpoint" in message
    assert sorted(p.name for p in checkpoints.iterdir()) == ["epoch-0.torn-1", "epoch-0.torn-2", "epoch-1"]
    assert_same_model(whole, tmp_path)


@pytest.mark.slow
def test_an_older_versions_torn_checkpoint_is_set_aside_and_the_one_before_resumed(init, whole, tmp_path,
                                                                                  monkeypatch, capsys):
    """An older version saved in place and pruned after: killed while writing epoch-1's optimizer
    state, it left epoch-0 whole beside an epoch-1 whose optimizer.bin is cut short."""
    import torch

    def save_in_place(accelerator, out_dir, epoch):
        accelerator.save_state(out_dir / "checkpoints" / f"epoch-{epoch}")
        for older, path in loop._checkpoints(out_dir):
            if older < epoch:
                loop.shutil.rmtree(path)

    def save_and_die(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        if str(f).endswith("epoch-1/optimizer.bin"):
            os.truncate(f, os.path.getsize(f) // 2)
            raise KeyboardInterrupt

    real_save = torch.save
    with monkeypatch.context() as patch:
        patch.setattr(loop, "_save_checkpoint", save_in_place)
        patch.setattr(torch, "save", save_and_die)
        with pytest.raises(KeyboardInterrupt):
            training.train(TRAIN, VAL, init=init, out_dir=tmp_path, **KNOBS)
    checkpoints = tmp_path / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["epoch-0", "epoch-1"]
    capsys.readouterr()
    history = training.train(TRAIN, VAL, init=init, out_dir=tmp_path, **KNOBS)
    assert "epoch-1: an incomplete checkpoint (optimizer.bin is cut short), set aside as epoch-1.torn-1" \
        in capsys.readouterr().out
    assert [h["epoch"] for h in history if h["split"] == "val"] == [1, 2, 3]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["epoch-1", "epoch-1.torn-1"]
    assert_same_model(whole, tmp_path)


KILLED_SCRIPT = """
import json, os, shutil, signal, sys
import torch
from robustkit.crossencoder import train as training

out, init, at, epoch, config = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])

def die():  # kill -9: no exception handler, no cleanup runs
    os.kill(os.getpid(), signal.SIGKILL)

real_save, real_rmtree = torch.save, shutil.rmtree

def save(obj, f, *args, **kwargs):  # accelerate writes optimizer.bin with torch.save
    real_save(obj, f, *args, **kwargs)
    if at == "optimizer.bin" and str(f).endswith(f"epoch-{epoch}.partial/optimizer.bin"):
        os.truncate(f, os.path.getsize(f) // 2)  # midway through the file
        die()

def rmtree(path, *args, **kwargs):  # the new checkpoint is in place, the one before not yet gone
    if at == "prune" and str(path).endswith(f"epoch-{epoch - 1}"):
        die()
    real_rmtree(path, *args, **kwargs)

torch.save, shutil.rmtree = save, rmtree
training.train(config["train"], config["val"], init=init, out_dir=out, **config["knobs"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("at,epoch,left", [
    ("optimizer.bin", 0, ["epoch-0.partial"]),
    ("optimizer.bin", 1, ["epoch-0", "epoch-1.partial"]),
    ("prune", 1, ["epoch-0", "epoch-1"]),
], ids=["writing epoch-0", "writing epoch-1", "between epoch-1 and pruning epoch-0"])
def test_training_killed_with_sigkill_while_checkpointing_resumes_to_the_same_bytes(at, epoch, left, init,
                                                                                   whole, tmp_path):
    config = json.dumps({"train": TRAIN, "val": VAL, "knobs": KNOBS})
    killed = subprocess.run([sys.executable, "-c", KILLED_SCRIPT, str(tmp_path), init, at, str(epoch), config],
                            capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    checkpoints = tmp_path / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == left  # never a torn epoch-N
    history = training.train(TRAIN, VAL, init=init, out_dir=tmp_path, **KNOBS)
    assert [h["epoch"] for h in history if h["split"] == "val"] == [1, 2, 3]
    assert not list(checkpoints.glob("*.partial")) and not list(checkpoints.glob("*.torn-*"))
    assert_same_model(whole, tmp_path)
