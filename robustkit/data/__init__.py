"""Data: record types, the embedded teaching set, real benchmarks, a researcher's own files
(``data.own``), answer normalisation."""
from robustkit.data.benchmarks import (DATASETS, Dataset, corpus, data_dir, load, mirror_summary,
                                       truthfulqa_corpus)
from robustkit.data.check import check_mini
from robustkit.data.own import read_corpus, read_questions
from robustkit.data.nli import NLI_LABELS, NLIPair, NLISet, load_nli
from robustkit.data.mini import (MINI_DIR, mini_corpus, mini_fingerprint, mini_misconceptions,
                                 mini_multihop, mini_questions, mini_rewrites)
from robustkit.data.records import (PERTURBATION_TYPES, Corpus, DataError, Misconception, Passage,
                                    Question, Rewrite, contains_answer, has_answer,
                                    normalize_answer, read_csv, read_jsonl, sha256_files,
                                    write_jsonl)

__all__ = [
    "DATASETS", "Dataset", "check_mini", "corpus", "data_dir", "load", "mirror_summary",
    "truthfulqa_corpus", "MINI_DIR",
    "mini_corpus", "mini_fingerprint", "mini_misconceptions", "mini_multihop", "mini_questions",
    "mini_rewrites", "PERTURBATION_TYPES", "Corpus", "DataError", "Misconception", "Passage",
    "Question", "Rewrite", "contains_answer", "has_answer", "normalize_answer", "read_csv",
    "read_jsonl", "sha256_files", "write_jsonl", "NLI_LABELS", "NLIPair", "NLISet", "load_nli",
    "read_corpus", "read_questions",
]
