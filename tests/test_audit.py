"""`python -m robustkit audit`: questions files and responses checked row by row and field by field,
the tables' arithmetic, and, on loopback, `robustkit serve --method dense --corpus FILE` audited over
a researcher's own questions, and `--method corm` giving, query for query, the verdicts the kit's own
run gives (notebook 04)."""
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from robustkit.audit.endpoints import RAGEndpoint, _check_reply
from robustkit.audit.protocol import analyse
from robustkit.callcache import CallCache
from robustkit.data import read_questions
from robustkit.data.records import DataError
from robustkit.loopback import free_port, server
from robustkit.methods import Query
from robustkit.models import ServerError
from faults import DROP, scripted
from mirror import needs_mirror


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_questions_file_is_read_with_its_rewrites(tmp_path):
    path = _write(tmp_path / "q.jsonl", [
        {"id": "a", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"],
         "rewrites": [{"type": "false_premise", "text": "Who wrote Hamlet after Marlowe?", "wrong_entity": "Marlowe"}]},
        {"question": "Capital of France?", "answers": ["Paris"]}])
    questions, rewrites = read_questions(path)
    assert [q.id for q in questions] == ["a", "q0002"]
    assert [(r.question_id, r.type, r.wrong_entity) for r in rewrites] == [("a", "false_premise", "Marlowe")]


@pytest.mark.parametrize("row, complaint", [
    ({"question": "Q?"}, "missing.*answers|answers"),
    ({"question": "Q?", "answers": "Paris"}, "answers"),
    ({"question": "Q?", "answers": ["x"], "rewrites": [{"type": "sarcasm", "text": "Q!"}]}, "sarcasm"),
    ({"question": "Q?", "answers": ["x"], "rewrites": [{"type": "false_premise"}]}, r"rewrites\[0\].text"),
])
def test_a_bad_row_is_named_by_line_and_field(tmp_path, row, complaint):
    path = _write(tmp_path / "q.jsonl", [{"question": "Fine?", "answers": ["yes"]}, row])
    with pytest.raises(DataError, match=rf"q.jsonl:2.*({complaint})"):
        read_questions(path)


@pytest.mark.parametrize("reply, field", [
    ({"answer": 3}, r"answers\[0\].answer"),
    ({"answer": "x", "abstained": "no"}, r"answers\[0\].abstained"),
    ({"answer": "x", "passages": [{"title": "t"}]}, r"answers\[0\].passages\[0\].text"),
])
def test_a_malformed_answer_is_named_by_field(reply, field):
    with pytest.raises(ServerError, match=field):
        _check_reply(reply, 0, "http://x/v1/rag")


QUERIES = [Query("q1", "q1", "Who wrote Hamlet?"), Query("q2", "q2", "What is the capital of Norway?")]
RIGHT = {"Who wrote Hamlet?": "William Shakespeare", "What is the capital of Norway?": "Oslo",
         "Who painted the Mona Lisa?": "Leonardo da Vinci"}
LATER = [Query("q3", "q3", "Who painted the Mona Lisa?")]


def _answers(body, *, ids=True, order=1):
    rows = [{**({"id": q["id"]} if ids else {}), "answer": RIGHT[q["question"]]} for q in body["questions"]]
    return {"answers": rows[::order]}


def test_answers_sent_back_in_another_order_are_matched_by_id(tmp_path):
    with scripted(lambda path, body, n: (200, _answers(body, order=-1))) as (url, _):
        answers = RAGEndpoint(url, cache=CallCache(tmp_path / "c.sqlite")).answer(QUERIES)
    assert [a.text for a in answers] == ["William Shakespeare", "Oslo"]


def test_answers_without_ids_are_refused_unless_one_question_was_asked(tmp_path):
    with scripted(lambda path, body, n: (200, _answers(body, ids=False))) as (url, _):
        with pytest.raises(ServerError, match=r"must carry the id of its question.*never by position"):
            RAGEndpoint(url, cache=CallCache(tmp_path / "c.sqlite")).answer(QUERIES)
        one = RAGEndpoint(url, batch_size=1, cache=CallCache(tmp_path / "d.sqlite")).answer(QUERIES)
    assert [a.text for a in one] == ["William Shakespeare", "Oslo"]


@pytest.mark.parametrize("fault", [DROP, (200, b'{"answers": [{"id": "0", "answer": "Will'), (503, b"<html>busy</html>")])
def test_a_dropped_truncated_or_failed_reply_is_retried_and_nothing_of_it_cached(tmp_path, fault):
    faulty = {"requests": 1}  # how many requests from now on meet the fault

    def reply(path, body, n):
        faulty["requests"] -= 1
        return fault if faulty["requests"] >= 0 else (200, _answers(body))

    with scripted(reply) as (url, received):
        system = RAGEndpoint(url, retries=1, cache=CallCache(tmp_path / "c.sqlite"))
        assert [a.text for a in system.answer(QUERIES)] == ["William Shakespeare", "Oslo"]  # retried
        assert len(received) == 2
        faulty["requests"] = 2
        with pytest.raises(ServerError, match=r"did not answer after 2 tries \(last: "):
            system.answer(LATER)
        assert [a.text for a in system.answer(QUERIES)] == ["William Shakespeare", "Oslo"]
        assert (len(received), system.hits) == (4, 2)  # the answers cached were the good ones
        assert [a.text for a in system.answer(LATER)] == ["Leonardo da Vinci"]
        assert len(received) == 5  # nothing of the failed requests was cached


def test_a_refused_request_is_named_and_not_retried(tmp_path):
    with scripted(lambda path, body, n: (422, {"detail": "questions[0].question: field required"})) as (url, received):
        with pytest.raises(ServerError, match=r"refused the request \(HTTP 422.*field required"):
            RAGEndpoint(url, retries=3, cache=False).answer(QUERIES)
    assert len(received) == 1


def test_an_unreachable_system_stops_with_the_url_after_bounded_retries(tmp_path):
    port = free_port()
    system = RAGEndpoint(f"http://127.0.0.1:{port}/v1", retries=1, timeout=2, cache=False)
    with pytest.raises(ServerError, match=rf"127.0.0.1:{port}/v1/rag did not answer after 2 tries"):
        system.answer([Query("q", "q", "Who wrote Hamlet?")])


@needs_mirror("nq_open")
def test_an_nq_open_audit_set_is_its_first_questions_with_the_adversary_s_rewrites(monkeypatch):
    from robustkit.audit import protocol

    asked = []
    monkeypatch.setattr(protocol.corm_train, "adversary_rewrites",
                        lambda cfg, questions, **knobs: asked.extend(questions) or [])
    questions, rewrites = protocol.audit_set("nq_open", "tiny", n_questions=3)
    assert [q.id for q in questions] == ["nq-0000", "nq-0001", "nq-0002"] and asked == questions


def test_the_tables_count_flips_and_sycophancy_per_question():
    def row(qid, kind, correct, top_id, top_text, wrong=None, premises=()):
        return {"method": "s", "query_id": f"{qid}|{kind}", "question_id": qid, "type": kind,
                "condition": "clean" if kind == "clean" else "biased", "query": f"{qid} {kind}",
                "answers": ["Paris"], "answer": "Paris" if correct else "Lyon", "correct": float(correct),
                "abstained": False, "model_calls": 1, "retrieval_calls": 1, "latency_s": 0.0,
                "wrong_entity": wrong, "premise_ids": list(premises),
                "trace": {"passages": [{"id": top_id, "title": "", "text": top_text}]}}
    rows = [row("a", "clean", 1, "g", "Paris is the capital"),
            row("a", "false_premise", 0, "w", "Lyon is large", wrong="Lyon"),
            row("b", "clean", 1, "g", "Paris is the capital"),
            row("b", "false_premise", 1, "g", "Paris is the capital", wrong="Marseille"),
            row("c", "clean", 0, "x", "nothing"),
            row("c", "false_premise", 0, "p", "a premise", premises=["p"])]
    tables = analyse(pd.DataFrame(rows))
    assert tables["accuracy"].set_index("condition")["accuracy"].round(1).to_dict() == \
        {"clean": 66.7, "false_premise": 33.3}
    assert list(tables["flips"]["question_id"]) == ["a"]  # c was wrong clean: no flip
    syc = tables["sycophancy"].iloc[0]
    assert (syc["top passage backs the premise %"], syc["top passage holds a gold answer %"]) == (66.7, 33.3)
    assert tables["tests"].iloc[0][["type", "only biased right", "only clean right"]].tolist() == ["false_premise", 0, 1]


# a researcher's own passages and questions (real facts, none of them in data/mini)
TOY_PASSAGES = [
    {"id": "t1", "title": "Leoš Janáček", "text": "Leoš Janáček was a Czech composer who wrote the opera Jenůfa, "
                                                   "first performed in Brno in 1904."},
    {"id": "t2", "title": "Brno", "text": "Brno is the second-largest city of the Czech Republic, in Moravia."},
    {"id": "t3", "title": "Jenůfa", "text": "Jenůfa is an opera in three acts by Leoš Janáček to a Czech libretto."},
    {"id": "t4", "title": "Antonín Dvořák", "text": "Antonín Dvořák, a Czech composer, wrote the New World "
                                                     "Symphony in 1893 while living in New York."},
    {"id": "t5", "title": "Bedřich Smetana", "text": "Bedřich Smetana composed the cycle of symphonic poems "
                                                      "Má vlast, which includes Vltava."},
]
TOY_QUESTIONS = [
    {"id": "jenufa", "question": "Who composed the opera Jenufa?", "answers": ["Leos Janacek", "Janacek"],
     "rewrites": [{"type": "false_premise", "text": "Why did Dvorak compose the opera Jenufa?",
                   "wrong_entity": "Antonín Dvořák"}]},
    {"id": "new-world", "question": "Who wrote the New World Symphony?", "answers": ["Antonín Dvořák", "Dvořák"],
     "rewrites": [{"type": "confirmation_bias", "text": "I am sure Smetana wrote the New World Symphony; who "
                   "wrote it?", "wrong_entity": "Bedřich Smetana"}]},
    {"id": "ma-vlast", "question": "Which composer wrote Ma vlast?", "answers": ["Bedrich Smetana", "Smetana"],
     "rewrites": [{"type": "topical_distraction", "text": "Brno is a lovely city in Moravia. Which composer "
                   "wrote Ma vlast?"}]},
]


@pytest.mark.slow
def test_serve_and_audit_read_a_researchers_own_corpus(tmp_path):
    """`serve --corpus FILE` answers from the researcher's passages, as the method built in-process
    over them does, and `audit --questions FILE` of that server asks each question and its
    hand-written rewrite and writes its report."""
    from robustkit import registry
    from robustkit.data import read_corpus
    from robustkit.retrieval import DenseRetriever, load_embedder

    passages, questions = _write(tmp_path / "passages.jsonl", TOY_PASSAGES), _write(tmp_path / "q.jsonl", TOY_QUESTIONS)
    corpus = read_corpus(passages)
    own = registry.build("dense", "tiny", corpus=corpus, retriever=DenseRetriever(corpus, load_embedder("tiny")))
    expected = own.answer([Query(q["id"], q["id"], q["question"]) for q in TOY_QUESTIONS])
    assert {pid for a in expected for pid in a.passage_ids} <= {p["id"] for p in TOY_PASSAGES}
    with server(lambda port: [sys.executable, "-m", "robustkit", "serve", "--method", "dense", "--scale", "tiny",
                              "--corpus", str(passages), "--port", str(port)]) as url:
        served = RAGEndpoint(url, name="dense", cache=False).answer(
            [Query(q["id"], q["id"], q["question"]) for q in TOY_QUESTIONS])
        assert [a.passage_ids for a in served] == [a.passage_ids for a in expected]
        assert [a.text for a in served] == [a.text for a in expected]
        env = {**os.environ, "ROBUSTKIT_RUNS": str(tmp_path / "runs")}
        audit = subprocess.run([sys.executable, "-m", "robustkit", "audit", "--endpoint", url, "--questions",
                                str(questions), "--name", "toy", "--scale", "tiny", "--out", str(tmp_path / "report")],
                               env=env, capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
    calls = json.loads(next((tmp_path / "report").glob("*.json")).read_text())["calls"]
    assert len(calls) == 2 * len(TOY_QUESTIONS)  # each question clean and its one hand-written rewrite
    assert "3 questions, 3 biased rewrites" in audit.stdout


@pytest.mark.slow
def test_the_audit_of_a_served_kit_method_gives_its_own_verdicts(tmp_path):
    """CoRM served and audited gives, query for query, notebook 04's verdicts."""
    from robustkit.audit import analyse, audit_set, run, write_report
    from robustkit.corm import settings
    from robustkit.corm.pipeline import queries_for, run_methods
    from robustkit.corm.train import test_set

    questions, rewrites = audit_set("mini", "tiny", n_questions=8)
    # notebook 04's protocol on the same questions, in-process first (it stages what the method
    # needs, CoRM's critic, which the server then reads instead of training it before it answers)
    asked, rotated = test_set(settings("tiny"))
    ids = {q.id for q in questions}
    own = run_methods(settings("tiny"), ["corm"], queries_for([q for q in asked if q.id in ids],
                                                                 [r for r in rotated if r.question_id in ids]))
    # the endpoint's URL (a fresh port) is part of the staged audit's key and the client caches
    # nothing: every query is asked
    with server(lambda port: [sys.executable, "-m", "robustkit", "serve", "--method", "corm",
                              "--scale", "tiny", "--port", str(port)]) as url:
        results = run(RAGEndpoint(url, name="corm", batch_size=8, cache=False), questions, rewrites, name="corm")
    audited = results.set_index("query_id").loc[own["query_id"]]
    # both processes share the call cache, so equal reader prompts give equal answers: what this
    # checks is that the served method read the same passages, asked the same prompt and was judged alike
    assert [[p["id"] for p in t["passages"]] for t in audited["trace"]] == own["passage_ids"].tolist()
    assert audited["answer"].tolist() == own["answer"].tolist()
    assert audited["correct"].tolist() == own["correct"].tolist()
    tables = analyse(results)
    paths = write_report(results, tables, tmp_path / "report", system="corm", endpoint=url, scale="tiny", source="mini")
    assert f"{tables['accuracy'].iloc[0]['accuracy']:.1f}%" in paths["md"].read_text()
    assert len(json.loads(paths["json"].read_text())["calls"]) == len(results) == 8 * 4


def test_the_report_figure_pairs_each_bias_type_with_clean_and_its_csv_holds_both_panels(tmp_path):
    """Two unpaired intervals can overlap while the paired drop clears zero: the figure's right
    panel draws the paired drop per bias type with its McNemar p, and the CSV holds both panels."""
    from robustkit.audit import analyse, write_report

    rows = []
    for i in range(12):
        for kind, correct in (("clean", 1.0), ("false_premise", float(i % 4 == 0))):
            rows.append({"method": "s", "query_id": f"q{i}|{kind}", "question_id": f"q{i}", "type": kind,
                         "condition": "clean" if kind == "clean" else "biased", "query": f"q{i} {kind}",
                         "answers": ["Paris"], "answer": "Paris" if correct else "Lyon", "correct": correct,
                         "abstained": False, "model_calls": 1, "retrieval_calls": 1, "latency_s": 0.0,
                         "wrong_entity": None, "premise_ids": [], "trace": {"passages": []}})
    results = pd.DataFrame(rows)
    paths = write_report(results, analyse(results), tmp_path, system="s", endpoint="http://x", scale="tiny",
                         source="mini")
    plotted = pd.read_csv(paths["csv"])
    assert plotted.groupby("panel").size().to_dict() == {"accuracy": 2, "paired drop": 1}
    drop = plotted[plotted["panel"] == "paired drop"].iloc[0]
    assert drop["type"] == "false_premise" and round(drop["drop"], 1) == 75.0 and drop["drop CI low"] > 0
