"""The kit's boundaries, tried as a hostile user would: every bad input stops with an error that
names the culprit, before any model is loaded or file written; every long stage killed midway
resumes to the same bytes. (Malformed data files: ``test_reliability_loaders.py``.)"""
import json
import os
import signal
import subprocess
import sys

import pytest

from robustkit import metrics
from robustkit.artifacts import read_manifest, stage
from robustkit.baselines import RerankedRAG
from robustkit.config import get_scale, with_overrides
from robustkit.corm.config import settings
from robustkit.corm.method import RiskAwareRAG
from robustkit.corm.teacher import robustness
from robustkit.crossencoder.groups import split_groups
from robustkit.crossencoder.loss import make_loss
from robustkit.data import Corpus, DataError, Misconception, Passage, Question, Rewrite
from robustkit.retrieval import BM25Retriever, build_retriever

NAN = float("nan")


class Untouchable:
    """Stands in for a model, retriever or corpus: any use of it means work started."""

    def __getattr__(self, name):
        raise AssertionError(f"work started (.{name}) before the bad input was refused")


U = Untouchable()

# (case, call, error type, words the message must contain)
BAD_INPUTS = [
    # a string where a list of strings belongs is never split into characters
    ("answers as one string", lambda: Question("q1", "who?", "Octavian"), TypeError, "answers"),
    ("gold_ids as one string", lambda: Question("q1", "who?", ("a",), gold_ids="p-1"), TypeError, "gold_ids"),
    ("premise_ids as one string", lambda: Rewrite("q1", "false_premise", "x?", premise_ids="p-1"),
     TypeError, "premise_ids"),
    ("correct_answers as one string", lambda: Misconception("m1", "x?", "Myths", "b", "yes", ("no",)),
     TypeError, "correct_answers"),
    ("a non-string answer", lambda: Question("q1", "who?", ("a", 3)), TypeError, "3"),
    ("a numeric passage id", lambda: Passage(7, "title", "text"), TypeError, "Passage.id"),
    ("an empty question", lambda: Question("q1", "  ", ("a",)), ValueError, "Question.text"),
    ("a question without answers", lambda: Question("q1", "who?", ()), ValueError, "no answers"),
    ("an unknown perturbation type", lambda: Rewrite("q1", "sarcasm", "x?"), ValueError, "sarcasm"),
    ("an empty corpus", lambda: Corpus([], name="mine"), DataError, "mine"),
    ("duplicate passage ids", lambda: Corpus([Passage("p", "", "a"), Passage("p", "", "b")]),
     DataError, "duplicate"),
    # metrics: bare strings, NaN, empty and mismatched inputs
    ("exact_match with a bare answer string", lambda: metrics.exact_match("a", "abc"), TypeError, "abc"),
    ("substring_match with a bare answer string",
     lambda: metrics.substring_match("I have no idea", "Octavian"), TypeError, "Octavian"),
    ("recall@k with a bare id string", lambda: metrics.recall_at_k(["p"], "p-1", 1), TypeError, "p-1"),
    ("first rank with a bare id string", lambda: metrics.first_relevant_rank(["p"], "p-1"), TypeError, "p-1"),
    ("recall@0", lambda: metrics.recall_at_k(["p"], ["p"], 0), ValueError, "k=0"),
    ("NDCG@0", lambda: metrics.ndcg_at_k([1, 0], [1, 0], 0), ValueError, "k=0"),
    ("NaN confidence into AURC", lambda: metrics.aurc([NAN, .5], [1, 0]), ValueError, "confidence"),
    ("NaN correctness into ECE", lambda: metrics.expected_calibration_error([.2, .5], [NAN, 0]),
     ValueError, "correct"),
    ("NaN score into NDCG", lambda: metrics.ndcg_at_k([NAN, 1], [1, 0], 3), ValueError, "scores"),
    ("NaN gain into MRR", lambda: metrics.mrr([0, 1], [NAN, 0]), ValueError, "gains"),
    ("NaN row into McNemar", lambda: metrics.mcnemar([1, NAN], [1, 0]), ValueError, "correct_a"),
    ("non-binary McNemar", lambda: metrics.mcnemar([1, .5], [1, 0]), ValueError, "0.5"),
    ("empty bootstrap", lambda: metrics.bootstrap_ci([]), ValueError, "none"),
    ("clusters of another length", lambda: metrics.cluster_bootstrap_ci([1, 0], ["a"]), ValueError, "length"),
    ("confidence and correctness of other lengths", lambda: metrics.aurc([.1, .2], [1]),
     ValueError, "length"),
    ("coverage above 1", lambda: metrics.accuracy_at_coverage([.1, .2], [1, 0], 1.5), ValueError, "1.5"),
    ("confidence outside [0, 1] into ECE", lambda: metrics.expected_calibration_error([2.0], [1]),
     ValueError, "[0, 1]"),
    # knobs: out of range, NaN, wrong type, unknown
    ("an unknown scale", lambda: get_scale("huge"), ValueError, "huge"),
    ("a method knob on a Scale", lambda: with_overrides("tiny", k_perturbations=0), ValueError,
     "k_perturbations"),
    ("negative test questions", lambda: with_overrides("tiny", n_test_questions=-1), ValueError,
     "n_test_questions"),
    ("K = 0", lambda: settings("tiny", k_perturbations=0), ValueError, "k_perturbations"),
    ("C = 0", lambda: settings("tiny", context_size=0), ValueError, "context_size"),
    ("M at inference = -5", lambda: settings("tiny", m_inference=-5), ValueError, "m_inference"),
    ("fractional epochs", lambda: settings("tiny", epochs=1.5), ValueError, "epochs"),
    ("NaN learning rate", lambda: settings("tiny", lr=NAN), ValueError, "lr"),
    ("M below C", lambda: settings("tiny", m_inference=1, context_size=2), ValueError, "M at inference"),
    ("an unknown CoRM knob", lambda: settings("tiny", gama=0.5), ValueError, "gama"),
    ("NaN τ", lambda: make_loss("hybrid", NAN), ValueError, "tau"),
    ("τ = 0", lambda: make_loss("hybrid", 0), ValueError, "tau"),
    ("an unknown loss", lambda: make_loss("hinge"), ValueError, "hinge"),
    ("NaN γ", lambda: RiskAwareRAG(U, U, U, U, gamma=NAN), ValueError, "gamma"),
    ("γ above 1", lambda: RiskAwareRAG(U, U, U, U, gamma=1.5), ValueError, "gamma"),
    ("M = 0 candidates", lambda: RerankedRAG(U, U, U, U, m=0, c=1), ValueError, "M"),
    ("C above M", lambda: RerankedRAG(U, U, U, U, m=2, c=3), ValueError, "M (2) must be >= C (3)"),
    ("a validation share of 1.5", lambda: split_groups([{"question_id": "a"}] * 2, val_fraction=1.5),
     ValueError, "val_fraction"),
    ("one question to split", lambda: split_groups([{"question_id": "a"}]), ValueError, "2 questions"),
    ("an unknown retriever", lambda: build_retriever("splade", U), ValueError, "splade"),
    # the second ring: what used to pass and turn into a wrong result, or a library's raw error
    ("an empty gold answer", lambda: Question("q1", "who?", ("Octavian", " ")), ValueError, "answer 1 is empty"),
    ("a label without outcomes", lambda: robustness({"key": "q1|p-1", "outcomes": []}), ValueError,
     "'q1|p-1' has no outcomes"),
    ("a bare string to answer()", lambda: RerankedRAG(U, U, U, U, name="dense").answer("who wrote hamlet"), TypeError,
     "got one str ('who wrote hamlet')"),
    ("strings to answer()", lambda: RerankedRAG(U, U, U, U, name="dense").answer(["who wrote hamlet"]), TypeError,
     "query 0 is a str"),
    ("a corpus BM25 cannot index", lambda: BM25Retriever(Corpus([Passage("p", "", "...!"), Passage("q", "", "the")],
                                                               name="marks")),
     DataError, "corpus 'marks': none of its 2 passages has a word BM25 can index"),
]


@pytest.mark.parametrize("case,call,error,words", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_refused_with_a_message_naming_it(case, call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value), f"{case}: message {str(raised.value)!r} does not name {words!r}"


def test_bad_training_knobs_are_refused_before_a_model_loads(tmp_path):
    from robustkit.crossencoder.train import train

    groups = [{"question_id": "q", "query": "q", "docs": ["d"], "labels": [1.0]}]
    for knobs, words in [({"lr": NAN}, "lr"), ({"epochs": 0}, "epochs"), ({"warmup": 2.0}, "warmup"),
                         ({"batch_groups": 2.5}, "batch_groups"), ({"tau": NAN}, "tau")]:
        with pytest.raises(ValueError, match=words):
            train(groups, groups, init="/nonexistent/encoder", out_dir=tmp_path / "out", **knobs)
    assert not (tmp_path / "out").exists()


def test_search_refuses_bad_queries_and_k(embedder):
    from robustkit.data import mini_corpus
    from robustkit.retrieval import BM25Retriever

    bm25 = BM25Retriever(mini_corpus())
    for queries, k, error, words in [("one string", 3, TypeError, "one string"),
                                     (["ok", 5], 3, TypeError, "query 1"),
                                     (["ok"], 0, ValueError, "k"), (["ok"], True, ValueError, "k"),
                                     (["ok"], 2.5, ValueError, "k")]:
        with pytest.raises(error, match=words):
            bm25.search(queries, k)


def test_labelling_refuses_a_repeated_question_before_any_model_call(tmp_path):
    from robustkit.corm.teacher import label

    q = Question("q1", "who?", ("a",))
    perturbations = [{"question_id": "q1", "k": 0, "type": "false_premise", "text": "who, really?"}]
    with pytest.raises(ValueError, match="'q1' appears twice"):
        label([q, q], perturbations, U, U, U, m=3, log_path=tmp_path / "log.jsonl")
    with pytest.raises(ValueError, match="M .* must be >= 1"):
        label([q], perturbations, U, U, U, m=0, log_path=tmp_path / "log.jsonl")
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("argv,words", [
    (["run", "--scale", "huge"], "invalid choice: 'huge'"),
    (["run", "--seed", "-1"], "the seed must be an integer >= 0"),
    (["run", "selfrag"], "invalid choice: 'selfrag'"),
    (["gap", "--retriever", "splade"], "invalid choice: 'splade'"),
    (["audit", "--endpoint", "http://x/v1", "--n-questions", "-3"], "--n-questions must be an integer >= 0, got '-3'"),
    (["audit", "--endpoint", "http://x/v1", "--timeout", "0"], "a timeout is a positive number of seconds, got '0'"),
    (["audit", "--endpoint", "http://x/v1", "--timeout", "nan"], "a timeout is a positive number of seconds"),
    (["serve", "--method", "dense", "--port", "70000"], "a port is an integer from 1 to 65535, got '70000'"),
])
def test_cli_refuses_bad_arguments_with_a_message(argv, words, capsys):
    from robustkit.__main__ import main

    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2 and words in capsys.readouterr().err


def test_cli_names_a_truncated_groups_file(tmp_path):
    groups = tmp_path / "groups.jsonl"
    groups.write_text('{"query": "a", "docs": ["x"], "labels": [1]}\n{"query": "b", "do')
    out = subprocess.run([sys.executable, "-m", "robustkit.corm", "train", "--groups", str(groups),
                          "--init", "x", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and f"{groups}:2: malformed JSON" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "out").exists()


def test_truncated_or_missing_manifests(tmp_path):
    path = tmp_path / "a.txt"
    builds = []

    def build(out, scratch):
        builds.append(1)
        out.write_text("v")

    stage(path, {"x": 1}, build, lambda p: p.read_text())
    manifest = tmp_path / "a.txt.manifest.json"
    manifest.write_text(manifest.read_text()[:20])  # torn
    with pytest.raises(FileNotFoundError, match="a.txt.manifest.json"):
        read_manifest(path)
    assert stage(path, {"x": 1}, build, lambda p: p.read_text()) == "v" and len(builds) == 2
    assert read_manifest(path)["inputs"] == {"x": 1}


# --- killed midway, resumed: the same bytes --------------------------------------------------------

LABELLING_SCRIPT = """
import os, signal, sys
from robustkit.artifacts import stage
from robustkit.corm.teacher import label, label_counts
from robustkit.data import mini_corpus, mini_questions, read_jsonl, write_jsonl
from robustkit.callcache import CallCache
from robustkit.llm import Generator
from robustkit.retrieval import DenseRetriever, load_embedder

out, cache, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
corpus, questions = mini_corpus(), mini_questions("train")[:2]
perturbations = [{"question_id": q.id, "k": k, "type": "false_premise", "text": f"{q.text} {extra}"}
                 for q in questions for k, extra in enumerate(["in the old days", "as i recall"])]
teacher = Generator("teacher", "tiny", cache=CallCache(cache))
real, calls = teacher.generate, [0]

def generate_or_die(*args, **kwargs):
    calls[0] += 1
    if calls[0] == kill_at:  # kill -9: no exception handler, no cleanup runs
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)

teacher.generate = generate_or_die
retriever = DenseRetriever(corpus, load_embedder("tiny"))

def build(path, scratch):  # counted as corm.train.labels counts
    built = label(questions, perturbations, corpus, retriever, teacher, m=2, log_path=scratch / "log.jsonl",
                  chunk_size=1, progress=False)
    write_jsonl(path, built)
    return label_counts(built, teacher.misses, teacher.hits)

stage(out, {"questions": [q.id for q in questions]}, build, read_jsonl)
"""


@pytest.mark.slow
def test_labelling_killed_with_sigkill_resumes_to_the_same_bytes(tmp_path):
    def run(name, kill_at=0):
        return subprocess.run([sys.executable, "-c", LABELLING_SCRIPT, str(tmp_path / name / "labels.jsonl"),
                               str(tmp_path / name / "calls.sqlite"), str(kill_at)],
                              capture_output=True, text=True, env={**os.environ, "ROBUSTKIT_PROGRESS": "0"})

    (tmp_path / "whole").mkdir()
    (tmp_path / "killed").mkdir()
    assert run("whole").returncode == 0
    killed = run("killed", kill_at=2)  # after the first question's chunk was logged
    assert killed.returncode == -signal.SIGKILL
    partial = tmp_path / "killed" / "labels.jsonl.partial" / "log.jsonl"
    assert partial.read_text().count("\n") > 0 and not (tmp_path / "killed" / "labels.jsonl").exists()
    assert run("killed").returncode == 0
    assert (tmp_path / "killed" / "labels.jsonl").read_bytes() == (tmp_path / "whole" / "labels.jsonl").read_bytes()
    assert not partial.parent.exists()
    # the resumed manifest counts every generation the labels took, those before the kill included
    whole, resumed = (read_manifest(tmp_path / name / "labels.jsonl")["stats"] for name in ("whole", "killed"))
    assert whole["teacher generations"] == resumed["teacher generations"] == whole["sent when the stage ran"] == 8
    assert resumed["read from an interrupted run's log"] == 4 and resumed["sent when the stage ran"] == 4


def interrupted_on_call(real, n: int):
    """``real`` that raises KeyboardInterrupt (Ctrl-C) on its n-th call."""
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return wrapper


def test_perturbation_interrupted_resumes_to_the_same_records(tmp_path, generator, monkeypatch):
    from robustkit.corm.perturb import synthesize
    from robustkit.data import mini_corpus, mini_questions
    from robustkit.callcache import CallCache

    questions = mini_questions("train")[:2]
    knobs = dict(corpus=mini_corpus(), retries=1, seed=3, progress=False)
    whole = synthesize(questions, generator.with_cache(CallCache(tmp_path / "a.sqlite")), 1, **knobs)
    adversary = generator.with_cache(CallCache(tmp_path / "b.sqlite"))
    monkeypatch.setattr(adversary, "batch_size", 1)  # two batches: one finished, one killed
    real = adversary._decode
    monkeypatch.setattr(adversary, "_decode", interrupted_on_call(real, 2))
    with pytest.raises(KeyboardInterrupt):
        synthesize(questions, adversary, 1, **knobs)
    monkeypatch.setattr(adversary, "_decode", real)
    resumed = synthesize(questions, adversary, 1, **knobs)
    assert json.dumps(resumed) == json.dumps(whole)


def test_method_run_interrupted_resumes_to_the_same_answers(tmp_path, generator, monkeypatch, embedder):
    import pandas as pd

    from robustkit import methods
    from robustkit.baselines import FirstStage
    from robustkit.data import mini_corpus, mini_questions
    from robustkit.callcache import CallCache
    from robustkit.retrieval import DenseRetriever

    corpus = mini_corpus()
    questions = mini_questions("test")[:4]
    queries = pd.DataFrame([{"query_id": q.id, "question_id": q.id, "query": q.text,
                             "answers": q.answers} for q in questions])

    def rag(cache):
        reader = generator.with_cache(CallCache(tmp_path / cache))
        return reader, RerankedRAG(DenseRetriever(corpus, embedder), FirstStage("dense"), reader,
                                   corpus, m=3, c=1)

    _, system = rag("a.sqlite")
    whole = methods.run({"dense": system}, queries)
    reader, system = rag("b.sqlite")
    real = reader._decode
    monkeypatch.setattr(reader, "_decode", interrupted_on_call(real, 2))
    monkeypatch.setattr(reader, "batch_size", 2)
    with pytest.raises(KeyboardInterrupt):
        methods.run({"dense": system}, queries)
    monkeypatch.setattr(reader, "_decode", real)
    resumed = methods.run({"dense": system}, queries)
    columns = ["query_id", "answer", "trace", "correct"]
    assert resumed[columns].to_json() == whole[columns].to_json()
    assert all(trace["ranked_ids"] for trace in resumed["trace"])


@pytest.mark.slow
def test_critic_training_interrupted_resumes_to_the_same_weights(tmp_path, monkeypatch):
    import torch

    from robustkit.crossencoder import train as training
    from robustkit.crossencoder.model import CrossEncoder
    from robustkit.models import resolve_model

    init = resolve_model("critic_init", "tiny", verbose=False)
    groups = [{"question_id": f"q{i}", "query": f"who wrote book {i}?",
               "docs": [f"book {i} was written by author {i}.", f"book {i + 1} is a novel.", "rain."],
               "labels": [1.0, 0.0, 0.0]} for i in range(6)]
    knobs = dict(init=init.path, epochs=2, batch_groups=2, seed=1, progress=False)
    training.train(groups[:4], groups[4:], out_dir=tmp_path / "whole", **knobs)
    # the last epoch ends in the saved model, so only the epochs before it leave a checkpoint
    assert [p.name for p in (tmp_path / "whole" / "checkpoints").iterdir()] == ["epoch-0"]

    real = training.evaluate
    monkeypatch.setattr(training, "evaluate", interrupted_on_call(real, 2))  # in the 2nd epoch
    with pytest.raises(KeyboardInterrupt):
        training.train(groups[:4], groups[4:], out_dir=tmp_path / "resumed", **knobs)
    assert [p.name for p in (tmp_path / "resumed" / "checkpoints").iterdir()] == ["epoch-0"]
    monkeypatch.setattr(training, "evaluate", real)
    history = training.train(groups[:4], groups[4:], out_dir=tmp_path / "resumed", **knobs)
    assert [h["epoch"] for h in history if h["split"] == "val"] == [1, 2]
    a = CrossEncoder.load(tmp_path / "whole" / "model").state_dict()
    b = CrossEncoder.load(tmp_path / "resumed" / "model").state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    histories = [(tmp_path / d / "model" / "history.jsonl").read_text() for d in ("whole", "resumed")]
    assert histories[0] == histories[1]


def test_an_answer_that_normalises_to_nothing_matches_nothing_and_is_reported(capsys):
    from robustkit.data.benchmarks import Dataset

    assert metrics.exact_match("", ["---"]) == 0.0 and metrics.exact_match("---", ["---"]) == 0.0
    assert metrics.exact_match("AB", ["A+", "AB+"]) == 1.0  # the alias that survives still counts
    questions = [Question("q1", "who?", ("---",)), Question("q2", "who?", ("Octavian",))]
    assert Dataset("mine", "test", questions, "here", "x").unscorable == 1
    assert "mine test: 1 of 2 questions have no gold answer left after SQuAD normalisation (q1 ['---'])" \
        in capsys.readouterr().out


def test_no_queries_find_nothing_without_touching_a_model():
    import numpy as np

    from robustkit.retrieval import DenseRetriever, HybridRetriever

    corpus = Corpus([Passage("p", "", "Octavian became Augustus."), Passage("q", "", "Rome burned.")])
    dense = DenseRetriever(corpus, U, embeddings=np.eye(2, dtype=np.float32))  # U: any encoding fails
    for retriever in (BM25Retriever(corpus), dense, HybridRetriever(corpus, dense=dense)):
        assert retriever.search([], 2) == []


def test_a_false_premise_without_a_wrong_answer_is_refused_before_the_adversary_runs():
    from robustkit.corm.perturb import synthesize
    from robustkit.data import mini_corpus

    alone = [Question("q1", "Who founded Rome?", ("Romulus",))]
    with pytest.raises(ValueError, match="question 'q1': a false-premise rewrite needs a wrong answer"):
        synthesize(alone, U, k=3, corpus=mini_corpus())  # U: the adversary is never asked


def test_a_bare_string_or_no_labels_is_refused_by_name():
    from robustkit.corm.method import RiskAwareRAG
    from robustkit.corm.teacher import k_prime_distribution

    rag = RiskAwareRAG.__new__(RiskAwareRAG)  # rank checks its input before touching any part
    with pytest.raises(TypeError, match=r"queries must be a list of strings, got a str .*wrap it in a list"):
        rag.rank("who wrote hamlet")
    with pytest.raises(ValueError, match=r"needs the teacher's label rows"):
        k_prime_distribution([])
