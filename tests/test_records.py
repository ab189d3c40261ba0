import gzip

import pytest

from robustkit.artifacts import JsonlLog
from robustkit.data import (Corpus, DataError, Passage, has_answer, normalize_answer, read_csv,
                            read_jsonl)


def test_normalize_answer_squad_rules():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An Apple a day") == "apple day"


def test_has_answer_whole_words_and_title():
    p = Passage("p1", "Canberra", "It is the capital city.")
    assert has_answer(p, ["Canberra"])
    assert not has_answer("Canberran politics", ["Canberra"])


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1}\n{"id": 2,\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: malformed JSON"):
        read_jsonl(path)


def test_missing_field_names_line(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write('{"id": 1, "text": "a"}\n{"id": 2}\n')
    with pytest.raises(DataError, match=r"rows.jsonl.gz:2: missing field\(s\) \['text'\]"):
        read_jsonl(path, ("id", "text"))


def test_csv_empty_cell_rejected(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n3,\n")
    with pytest.raises(DataError, match=r"t.csv:3: empty value"):
        read_csv(path, ("a", "b"))


def test_empty_corpus_and_duplicates_rejected():
    with pytest.raises(DataError, match="empty"):
        Corpus([], "nothing")
    with pytest.raises(DataError, match="duplicate passage ids"):
        Corpus([Passage("x", "", "a"), Passage("x", "", "b")])


def test_jsonl_log_drops_torn_line_and_dedups(tmp_path):
    path = tmp_path / "log.jsonl"
    log = JsonlLog(path, "id")
    log.extend([{"id": "a", "v": 1}, {"id": "b", "v": 2}])
    with open(path, "a") as f:
        f.write('{"id": "c", "v"')  # a crash mid-write
    resumed = JsonlLog(path, "id")
    assert sorted(resumed.records) == ["a", "b"]
    resumed.extend([{"id": "b", "v": 9}, {"id": "c", "v": 3}])
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b", "c"]
