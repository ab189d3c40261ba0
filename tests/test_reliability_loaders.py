"""Bad input gets a clear error: every loader refuses a malformed file with a DataError that names
the file, the 1-based line (or record index), the field and the bad value."""
import gzip
import json
import shutil
from pathlib import Path

import pytest

from robustkit.data import (DATASETS, MINI_DIR, DataError, check_mini, load, mini_corpus,
                            mini_misconceptions, mini_multihop, mini_questions, mini_rewrites)
from robustkit.data.benchmarks import _hotpot_rows, _triviaqa_rows
from robustkit.data.validate import Row

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"

QUESTION = {"id": "q-001", "question": "who was the first roman emperor", "answer": "Augustus",
            "aliases": ["Octavian"], "answer_type": "person", "domain": "history",
            "split": "train", "gold_ids": ["p-1"]}
MYTH = {"id": "m-001", "question": "do we use only 10% of our brains", "category": "biology",
        "best_answer": "No", "correct_answers": ["No"], "incorrect_answers": ["Yes"],
        "split": "test", "myth_ids": ["p-m1"], "debunk_ids": ["p-d1"]}
HOP = {"id": "hop-001", "question": "in which city was the director of jaws born",
       "answer": "Cincinnati", "aliases": [], "answer_type": "place", "hop_type": "bridge",
       "bridge_entity": "Steven Spielberg", "split": "train", "support_ids": ["p-s1", "p-s2"],
       "distractor_ids": ["p-x1"]}
REWRITE = {"question_id": "q-001", "type": "false_premise", "text": "which emperor came after nero",
           "wrong_entity": "Nero", "premise_ids": ["p-fp"]}
PASSAGE = {"id": "p-1", "title": "Augustus", "text": "Augustus was the first emperor.",
           "kind": "gold"}
NQ_ROW = {"question": "what is the capital of australia", "answer": ["Canberra"]}


def jsonl(*rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def raises(call, *needles, kind=DataError):
    """``call()`` raises ``kind`` and its message contains every needle; the message is returned."""
    with pytest.raises(kind) as info:
        call()
    assert type(info.value) is kind, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A private copy of the fixture mirror; ``mirror(dataset, file, content)`` overwrites one
    file (text, or bytes for encoding faults) and returns its path."""
    root = tmp_path / "datasets"
    shutil.copytree(FIXTURES, root)
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def write(dataset: str, filename: str, content: str | bytes) -> Path:
        path = root / dataset / filename
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(gzip.compress(data) if filename.endswith(".gz") else data)
        return path
    return write


def mini_file(tmp_path, name, *rows) -> Path:
    (tmp_path / name).write_text(jsonl(*rows))
    return tmp_path


# --- 1. a string where a list is expected -------------------------------------------------

@pytest.mark.parametrize("field,value", [("aliases", "Octavian"), ("gold_ids", "p-1")])
def test_mini_question_string_for_list(tmp_path, field, value):
    root = mini_file(tmp_path, "questions.jsonl", QUESTION, {**QUESTION, "id": "q-2", field: value})
    raises(lambda: mini_questions(root=root), "questions.jsonl:2:", f"field {field!r}",
           "must be a list of strings", repr(value))


@pytest.mark.parametrize("loader,name,row,field", [
    (mini_misconceptions, "misconceptions.jsonl", MYTH, "correct_answers"),
    (mini_misconceptions, "misconceptions.jsonl", MYTH, "debunk_ids"),
    (mini_multihop, "multihop.jsonl", HOP, "support_ids"),
    (mini_multihop, "multihop.jsonl", HOP, "aliases"),
    (mini_rewrites, "rewrites.jsonl", REWRITE, "premise_ids"),
])
def test_other_mini_files_string_for_list(tmp_path, loader, name, row, field):
    root = mini_file(tmp_path, name, {**row, field: "p-1"})
    raises(lambda: loader(root=root), f"{name}:1:", f"field {field!r}", "'p-1'")


def test_mini_list_item_of_wrong_type(tmp_path):
    root = mini_file(tmp_path, "questions.jsonl", {**QUESTION, "aliases": ["Octavian", 7]})
    raises(lambda: mini_questions(root=root), "questions.jsonl:1:", "'aliases'",
           "item 1 of type int (7)")


@pytest.mark.parametrize("answer,got", [("Canberra", "str 'Canberra'"), ([], "list []")])
def test_nq_open_answer_not_a_list(mirror, answer, got):
    mirror("nq_open", "NQ-open.dev.jsonl", jsonl(NQ_ROW, NQ_ROW, {**NQ_ROW, "answer": answer}))
    raises(lambda: load("nq_open"), "NQ-open.dev.jsonl:3:", "field 'answer'",
           "must be a non-empty list of strings", got)


def test_oracle_answers_string(mirror):
    row = {"question": "q", "answers": "Canberra", "ctxs": [{"title": "T", "text": "x"}]}
    mirror("nq_open_oracle", "nq-open-oracle.jsonl.gz", jsonl(row))
    raises(lambda: load("nq_open_oracle", "all"), "nq-open-oracle.jsonl.gz:1:",
           "field 'answers'", "'Canberra'")


def test_truthfulqa_cell_without_answers(mirror):
    text = (FIXTURES / "truthfulqa" / "TruthfulQA.csv").read_text()
    cell = "You will get arthritis; Your joints will swell"
    mirror("truthfulqa", "TruthfulQA.csv", text.replace(cell, ";"))
    raises(lambda: load("truthfulqa"), "TruthfulQA.csv:2:", "field 'Incorrect Answers'",
           "answers separated by ';'", "str ';'")


def test_simpleqa_metadata_not_a_dict(mirror):
    mirror("simpleqa", "simple_qa_test_set.csv",
           "metadata,problem,answer\n\"['Geography']\",How many provinces?,10\n")
    raises(lambda: load("simpleqa"), "simple_qa_test_set.csv:2:", "field 'metadata'",
           "must be a dict", "list ['Geography']")


@pytest.mark.parametrize("edit,needles", [
    (lambda r: r["context"][1].__setitem__(1, "Scott Derrickson is an American director."),
     ("field 'context[1][1]'", "must be a list of strings", "str 'Scott Derrickson is")),
    (lambda r: r.__setitem__("answer", ["yes"]),
     ("field 'answer'", "must be a non-empty string", "list ['yes']")),
])
def test_hotpot_wrong_types(mirror, edit, needles):
    rows = json.loads((FIXTURES / "hotpotqa" / "hotpot_dev_distractor_v1.json").read_text())
    edit(rows[0])
    mirror("hotpotqa", "hotpot_dev_distractor_v1.json", json.dumps(rows))
    raises(lambda: load("hotpotqa"), "hotpot_dev_distractor_v1.json [0]:", *needles)


@pytest.mark.parametrize("cell,expected", [
    ("politician", "must be a JSON list of strings"),  # not JSON at all
    ('"""politician"""', "must be a non-empty list of strings"),  # the JSON string "politician"
])
def test_popqa_possible_answers_string(mirror, cell, expected):
    text = (FIXTURES / "popqa" / "popQA.tsv").read_text()
    mirror("popqa", "popQA.tsv", text.replace('["politician", "political leader"]', cell))
    raises(lambda: load("popqa"), "popQA.tsv:2:", "field 'possible_answers'", expected,
           "str 'politician'")


def test_triviaqa_aliases_string(mirror):
    doc = json.loads((FIXTURES / "triviaqa" / "unfiltered-web-dev.json").read_text())
    doc["Data"][0]["Answer"]["Aliases"] = "Sunset Blvd"
    mirror("triviaqa", "unfiltered-web-dev.json", json.dumps(doc))
    raises(lambda: load("triviaqa"), "unfiltered-web-dev.json Data[0]:", "field 'Answer.Aliases'",
           "'Sunset Blvd'")


def test_hub_rows_are_checked_and_placed_by_index():
    row = {"question_id": "tc_1", "question": "q", "answer": {"value": "A", "aliases": "B"}}
    raises(lambda: _triviaqa_rows([Row("hub:mandarjoshi/trivia_qa", "[0]", row)]),
           "hub:mandarjoshi/trivia_qa [0]:", "field 'answer.aliases'", "str 'B'")


def test_hub_layouts_still_parse():
    hotpot = {"id": "h1", "question": "q", "answer": "yes", "type": "comparison", "level": "hard",
              "context": {"title": ["A", "B"], "sentences": [["a1", " a2"], ["b1"]]},
              "supporting_facts": {"title": ["B"], "sent_id": [0]}}
    q = _hotpot_rows([Row("hub:hotpotqa/hotpot_qa", "[0]", hotpot)])[0]
    assert q.gold_ids == ("h1-1",) and q.extra["paragraphs"][0].text == "a1 a2"
    trivia = {"question_id": "tc_1", "question": "q", "answer": {"value": "A", "aliases": ["B"]}}
    assert _triviaqa_rows([Row("hub:x", "[0]", trivia)])[0].answers == ("A", "B")


# --- 2. duplicate ids --------------------------------------------------------------------

@pytest.mark.parametrize("loader,name,row", [
    (mini_questions, "questions.jsonl", QUESTION),
    (mini_misconceptions, "misconceptions.jsonl", MYTH),
    (mini_multihop, "multihop.jsonl", HOP),
])
def test_mini_duplicate_ids(tmp_path, loader, name, row):
    other = {**row, "id": row["id"] + "x"}
    root = mini_file(tmp_path, name, row, other, row)
    raises(lambda: loader(root=root), f"{name}:3:", "duplicate", repr(row["id"]), "first at line 1")


def test_mini_duplicate_rewrite_key(tmp_path):
    root = mini_file(tmp_path, "rewrites.jsonl", REWRITE,
                     {**REWRITE, "type": "topical_distraction"}, {**REWRITE, "text": "another"})
    raises(lambda: mini_rewrites(root=root), "rewrites.jsonl:3:", "duplicate rewrite",
           "('q-001', 'false_premise')", "first at line 1")


def test_mini_duplicate_passage_id(tmp_path):
    (tmp_path / "passages.jsonl").write_text(jsonl(PASSAGE, PASSAGE))
    raises(lambda: mini_corpus(root=tmp_path), "passages.jsonl:2:", "duplicate passage id 'p-1'",
           "first at line 1")


def test_mirror_duplicate_ids(mirror):
    rows = json.loads((FIXTURES / "hotpotqa" / "hotpot_dev_distractor_v1.json").read_text())
    mirror("hotpotqa", "hotpot_dev_distractor_v1.json", json.dumps(rows * 2))
    raises(lambda: load("hotpotqa"), "hotpot_dev_distractor_v1.json [1]:",
           "duplicate question id '5a8b57f25542995d1e6f1371'", "first at [0]")
    lines = (FIXTURES / "popqa" / "popQA.tsv").read_text().splitlines()
    mirror("popqa", "popQA.tsv", "\n".join([*lines, lines[1]]) + "\n")
    raises(lambda: load("popqa"), "popQA.tsv:3:", "duplicate id '4222362'", "first at line 2")
    doc = json.loads((FIXTURES / "triviaqa" / "unfiltered-web-dev.json").read_text())
    doc["Data"] *= 2
    mirror("triviaqa", "unfiltered-web-dev.json", json.dumps(doc))
    raises(lambda: load("triviaqa"), "unfiltered-web-dev.json Data[1]:",
           "duplicate question id 'tc_33'", "first at Data[0]")


# --- 3. values outside their closed set ----------------------------------------------------

@pytest.mark.parametrize("loader,name,row", [
    (mini_questions, "questions.jsonl", QUESTION),
    (mini_misconceptions, "misconceptions.jsonl", MYTH),
    (mini_multihop, "multihop.jsonl", HOP),
])
def test_mini_split_typo(tmp_path, loader, name, row):
    root = mini_file(tmp_path, name, row, {**row, "id": "x", "split": "Train"})
    raises(lambda: loader(root=root), f"{name}:2:", "field 'split'", "['train', 'test']",
           "str 'Train'")


def test_mini_rewrite_type_typo(tmp_path):
    root = mini_file(tmp_path, "rewrites.jsonl", {**REWRITE, "type": "false-premise"})
    raises(lambda: mini_rewrites(root=root), "rewrites.jsonl:1:", "field 'type'", "'false-premise'",
           "false_premise")


def test_unknown_split_argument(tmp_path, monkeypatch):
    # checked before any file is opened: these folders hold nothing
    monkeypatch.setenv("ROBUSTKIT_DATA_DIR", str(tmp_path))
    raises(lambda: mini_questions("bogus", root=tmp_path), "'bogus'", "'train', 'test' or None",
           kind=ValueError)
    raises(lambda: mini_multihop("Train", root=tmp_path), "'Train'", kind=ValueError)
    for name in DATASETS:
        expected = "['train', 'test', 'all']" if name == "nq_open_oracle" else "['test']"
        raises(lambda: load(name, "bogus"), "unknown split 'bogus'", name, expected,
               kind=ValueError)


# --- 4. bytes that are not UTF-8 -----------------------------------------------------------

def test_mini_non_utf8(tmp_path):
    good = jsonl(QUESTION).encode()
    (tmp_path / "questions.jsonl").write_bytes(good + b'{"id": "q-\xff"}\n')
    raises(lambda: mini_questions(root=tmp_path), "questions.jsonl:2:", "byte 0xff", "byte 11",
           "not UTF-8")


@pytest.mark.parametrize("dataset,filename,line", [
    ("nq_open", "NQ-open.dev.jsonl", 3),
    ("nq_open_oracle", "nq-open-oracle.jsonl.gz", 3),
    ("truthfulqa", "TruthfulQA.csv", 3),
    ("simpleqa", "simple_qa_test_set.csv", 3),
    ("popqa", "popQA.tsv", 2),
    ("hotpotqa", "hotpot_dev_distractor_v1.json", 1),
    ("triviaqa", "unfiltered-web-dev.json", 1),
])
def test_mirror_non_utf8(mirror, dataset, filename, line):
    data = (FIXTURES / dataset / filename).read_bytes()
    data = gzip.decompress(data) if filename.endswith(".gz") else data
    lines = data.split(b"\n")
    lines[line - 1] = lines[line - 1].replace(b"e", b"\xe9", 1)  # Latin-1 "é"
    mirror(dataset, filename, b"\n".join(lines))
    split = "all" if dataset == "nq_open_oracle" else "test"
    raises(lambda: load(dataset, split), f"{filename}:{line}:", "byte 0xe9", "not UTF-8")


# --- 5. malformed files ---------------------------------------------------------------------

def test_simpleqa_metadata_not_a_literal(mirror):
    mirror("simpleqa", "simple_qa_test_set.csv",
           "metadata,problem,answer\n\"{'topic': 'Art', 'answer_type'\",Who painted it?,Vermeer\n")
    raises(lambda: load("simpleqa"), "simple_qa_test_set.csv:2:", "field 'metadata'",
           "a Python dict literal", "\"{'topic': 'Art', 'answer_type'\"")


def test_popqa_s_pop_not_a_number(mirror):
    text = (FIXTURES / "popqa" / "popQA.tsv").read_text()
    mirror("popqa", "popQA.tsv", text.replace("\t142\t", "\tmany\t"))
    raises(lambda: load("popqa"), "popQA.tsv:2:", "field 's_pop'", "an integer", "'many'")


def test_csv_row_with_extra_cells(mirror):
    mirror("simpleqa", "simple_qa_test_set.csv",
           "metadata,problem,answer\n\"{'topic': 'Art'}\",Who painted it?,Vermeer,Delft\n")
    raises(lambda: load("simpleqa"), "simple_qa_test_set.csv:2:", "4 cells, the header has 3")


def test_csv_line_is_where_a_multiline_row_starts(mirror):
    mirror("simpleqa", "simple_qa_test_set.csv",
           "metadata,problem,answer\n\"{'topic': 'Art'}\",\"Who painted\nit?\",Vermeer\n"
           "\"{'topic': 'Art'}\",Who sang it?,\n")
    raises(lambda: load("simpleqa"), "simple_qa_test_set.csv:4:", "empty value", "['answer']")


@pytest.mark.parametrize("dataset,filename", [("hotpotqa", "hotpot_dev_distractor_v1.json"),
                                              ("triviaqa", "unfiltered-web-dev.json")])
def test_truncated_json(mirror, dataset, filename):
    text = (FIXTURES / dataset / filename).read_text()
    mirror(dataset, filename, text[:len(text) // 2])
    raises(lambda: load(dataset), f"{filename}:1:", "malformed JSON (", " at column ")


def test_truncated_gzip(mirror):
    data = gzip.compress((FIXTURES / "nq_open" / "NQ-open.dev.jsonl").read_bytes())
    path = mirror("nq_open_oracle", "nq-open-oracle.jsonl.gz", b"")
    path.write_bytes(data[: len(data) // 2])
    raises(lambda: load("nq_open_oracle", "all"), "nq-open-oracle.jsonl.gz", "not a complete gzip")


def test_missing_fields(mirror):
    mirror("nq_open", "NQ-open.dev.jsonl", jsonl(NQ_ROW, {"question": "q"}))
    raises(lambda: load("nq_open"), "NQ-open.dev.jsonl:2:", "missing field(s) ['answer']")
    row = {"question": "q", "answers": ["a"], "ctxs": [{"text": "no title here"}]}
    mirror("nq_open_oracle", "nq-open-oracle.jsonl.gz", jsonl(row))
    raises(lambda: load("nq_open_oracle", "all"), "nq-open-oracle.jsonl.gz:1:",
           "missing field 'ctxs[0].title'")
    doc = {"Data": [{"Question": "q", "QuestionId": "tc_1"}]}
    mirror("triviaqa", "unfiltered-web-dev.json", json.dumps(doc))
    raises(lambda: load("triviaqa"), "unfiltered-web-dev.json Data[0]:", "missing field 'Answer'")


def test_wrong_shapes(mirror):
    mirror("hotpotqa", "hotpot_dev_distractor_v1.json", json.dumps({"data": []}))
    raises(lambda: load("hotpotqa"), "hotpot_dev_distractor_v1.json", "a JSON array of records",
           "dict {'data': []}")
    mirror("hotpotqa", "hotpot_dev_distractor_v1.json", json.dumps([["not", "an", "object"]]))
    raises(lambda: load("hotpotqa"), "hotpot_dev_distractor_v1.json [0]:", "expected an object")
    mirror("triviaqa", "unfiltered-web-dev.json", json.dumps([1, 2]))
    raises(lambda: load("triviaqa"), "unfiltered-web-dev.json", "a 'Data' list", "got list")
    mirror("triviaqa", "unfiltered-web-dev.json", json.dumps({"Data": {"Question": "q"}}))
    raises(lambda: load("triviaqa"), "unfiltered-web-dev.json", "field 'Data' must be a JSON array")
    mirror("nq_open_oracle", "nq-open-oracle.jsonl.gz",
           jsonl({"question": "q", "answers": ["a"], "ctxs": []}))
    raises(lambda: load("nq_open_oracle", "all"), "nq-open-oracle.jsonl.gz:1:", "field 'ctxs'",
           "a non-empty list", "list []")
    rows = json.loads((FIXTURES / "hotpotqa" / "hotpot_dev_distractor_v1.json").read_text())
    rows[0]["supporting_facts"] = [["Scott Derrickson", 0, "extra"]]
    mirror("hotpotqa", "hotpot_dev_distractor_v1.json", json.dumps(rows))
    raises(lambda: load("hotpotqa"), "[0]:", "field 'supporting_facts[0]'", "[title, value] pair")


def test_empty_mirror_file(mirror):
    mirror("nq_open", "NQ-open.dev.jsonl", "\n")
    raises(lambda: load("nq_open"), "NQ-open.dev.jsonl: no records")
    mirror("hotpotqa", "hotpot_dev_distractor_v1.json", "[]")
    raises(lambda: load("hotpotqa"), "hotpot_dev_distractor_v1.json: no records")


def test_first_bad_row_is_the_one_named(tmp_path):
    root = mini_file(tmp_path, "questions.jsonl", QUESTION,
                     {**QUESTION, "id": "b", "split": "Test"},
                     {**QUESTION, "id": "c", "aliases": "Octavian"})
    raises(lambda: mini_questions(root=root), "questions.jsonl:2:", "'Test'")


# --- 6. a misspelt source is refused for every dataset --------------------------------------

@pytest.mark.parametrize("name", DATASETS)
def test_misspelt_source(name):
    split = "all" if name == "nq_open_oracle" else "test"
    raises(lambda: load(name, split, source="mirorr"), "unknown source 'mirorr'",
           "'auto', 'mirror' or 'hub'", kind=ValueError)


def test_oracle_has_no_hub_copy(mirror):
    raises(lambda: load("nq_open_oracle", "all", source="hub"), "has no hub copy")
    assert len(load("nq_open_oracle", "all", source="mirror")) == 3


# --- 7. the validator reports, never crashes ------------------------------------------------

@pytest.fixture
def mini_copy(tmp_path):
    root = tmp_path / "mini"
    shutil.copytree(MINI_DIR, root)
    return root


def test_check_mini_blank_manifest_line(mini_copy):
    lines = (mini_copy / "SHA256SUMS").read_text().splitlines()
    (mini_copy / "SHA256SUMS").write_text("\n".join([lines[0], "", *lines[1:]]) + "\n")
    report = check_mini(mini_copy)
    assert report.violations == ["SHA256SUMS:2: expected '<sha256>  <file name>', got ''"]


def test_check_mini_non_utf8_manifest(mini_copy):
    with open(mini_copy / "SHA256SUMS", "ab") as f:
        f.write(b"\xff\n")
    report = check_mini(mini_copy)
    assert len(report.violations) == 1
    assert all(s in report.violations[0] for s in ("SHA256SUMS:6:", "byte 0xff", "not UTF-8"))


def test_check_mini_non_utf8_data_file(mini_copy):
    path = mini_copy / "passages.jsonl"
    path.write_bytes(path.read_bytes().replace(b"e", b"\xe9", 1))
    report = check_mini(mini_copy)
    assert not report.ok
    assert "passages.jsonl:1:" in report.violations[0] and "byte 0xe9" in report.violations[0]


def test_check_mini_reports_wrong_types_instead_of_crashing(mini_copy):
    path = mini_copy / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["gold_ids"], rows[1]["question"], rows[2]["aliases"] = 5, ["who"], "Octavian"
    path.write_text(jsonl(*rows))
    violations = check_mini(mini_copy).violations
    assert f"questions.jsonl:{rows[0]['id']}: field 'gold_ids' must be a list of strings, got 5" \
        in violations
    assert f"questions.jsonl:{rows[1]['id']}: field 'question' must be a string, got ['who']" \
        in violations
    assert any(f"questions.jsonl:{rows[2]['id']}: field 'aliases'" in v and "'Octavian'" in v
               for v in violations)


# --- 8. loaders read, never write -----------------------------------------------------------

def test_loaders_write_nothing(mirror, tmp_path, mini_copy):
    def snapshot():
        return sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in tmp_path.rglob("*"))
    before = snapshot()
    for name in DATASETS:
        load(name, "all" if name == "nq_open_oracle" else "test")
    mini_questions(root=mini_copy), mini_rewrites(root=mini_copy), mini_corpus(root=mini_copy)
    assert snapshot() == before
    mirror("nq_open", "NQ-open.dev.jsonl", jsonl({**NQ_ROW, "answer": "x"}))
    before = snapshot()
    with pytest.raises(DataError):
        load("nq_open")
    assert snapshot() == before
