"""Benchmark loaders on small fixtures in each public format, and on the real mirror if present."""
from pathlib import Path

import pytest

from robustkit.data import DataError, benchmarks, corpus, load

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def fixture_mirror(monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(FIXTURES))


def test_nq_open_fixture(fixture_mirror):
    ds = load("nq_open")
    assert len(ds) == 3 and ds[2].answers == ("eight", "8")
    assert len(ds.fingerprint) == 64


def test_oracle_questions_and_corpus_dedup(fixture_mirror):
    assert len(load("nq_open_oracle", "all")) == 3
    c = corpus("nq_open_oracle")
    assert len(c) == 2  # two questions share the Canberra passage
    q = load("nq_open_oracle", "all")[1]
    assert q.gold_ids[0] in c


def test_truthfulqa_fixture(fixture_mirror):
    ds = load("truthfulqa")
    assert ds[0].incorrect_answers == ("You will get arthritis", "Your joints will swell")
    base, enriched = corpus("truthfulqa"), corpus("truthfulqa_enriched")
    assert len(base) == 2 and len(enriched) == 4


def test_simpleqa_hotpot_popqa_triviaqa_fixtures(fixture_mirror):
    sqa = load("simpleqa")
    assert sqa[1].answers == ("10",) and sqa[1].answer_type == "Number"
    hop = load("hotpotqa")[0]
    assert hop.extra["hop_type"] == "comparison" and len(hop.gold_ids) == 2
    assert load("popqa")[0].answers == ("politician", "political leader")
    assert load("triviaqa")[0].answers == ("Sunset Boulevard", "Sunset Blvd")


def test_offline_without_mirror_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="'popqa'.*akariasai/PopQA"):
        load("popqa")


def test_unknown_dataset_named():
    with pytest.raises(ValueError, match="unknown dataset 'nq_closed'"):
        load("nq_closed")


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/datasets mirror on this machine")
@pytest.mark.parametrize("name,split,rows", [("nq_open", "test", 3610),
                                             ("nq_open_oracle", "all", 2655),
                                             ("truthfulqa", "test", 817),
                                             ("simpleqa", "test", 4326)])
def test_real_mirror_row_counts(monkeypatch, name, split, rows):
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(SHARED))
    assert len(load(name, split)) == rows


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/datasets mirror on this machine")
def test_real_hotpotqa_mirror_in_ircot_layout(monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(SHARED))
    questions = load("hotpotqa")
    assert len(questions) == 488 and len({q.id for q in questions}) == 488
    first = questions[0]
    assert first.answers == ("Chief of Protocol",) and first.text.startswith("What government position")
    titles = {p.id: p.title for p in first.extra["paragraphs"]}
    assert sorted(titles[g] for g in first.gold_ids) == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    assert all(len(q.gold_ids) == 2 for q in questions)  # two supporting paragraphs each
    assert sum(len(q.extra["paragraphs"]) == 10 for q in questions) == 477  # (its README says 478)


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/datasets mirror on this machine")
def test_real_oracle_split_is_deterministic_and_disjoint(monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(SHARED))
    train, test = load("nq_open_oracle", "train"), load("nq_open_oracle", "test")
    assert len(train) + len(test) == 2655
    assert not {q.id for q in train} & {q.id for q in test}
    assert benchmarks.data_dir() == SHARED
