"""What CounterRefine calibrates: the REVISE threshold of constrained decoding, set on each
dataset's training questions (never an evaluated one).

    threshold = calibrate(cfg, ev)["revise_above"]

A 135M refiner puts P(REVISE) far below 1/2 on every draft, so a fixed 1/2 would never revise;
the threshold revises as often as drafts are wrong on the training questions
(``method.calibrate_revise_threshold``). Free decoding needs no threshold.
"""
from __future__ import annotations

from pathlib import Path

from robustkit import resources
from robustkit.artifacts import read_json, stage, write_json
from robustkit.counterrefine.config import CounterRefineConfig
from robustkit.counterrefine.data import run_dir
from robustkit.counterrefine.method import CounterRefine, calibrate_revise_threshold
from robustkit.judges import NormalisedMatch
from robustkit.methods import Query
from robustkit.qa_sets import QASet


def calibrate(cfg: CounterRefineConfig, ev: QASet) -> dict:
    """The REVISE threshold for constrained decoding, from the dataset's calibration questions:
    their drafts' error rate and the refiner's P(REVISE) on each (``calibrate_revise_threshold``).
    Staged under ``runs/<scale>/counterrefine/``: calibrated once, then read."""
    if cfg.decoding == "free" or not ev.train:
        return {"revise_above": 0.5, "questions": 0, "draft_error": None}
    probe = CounterRefine(ev.retriever, resources.generator_for(cfg.scale), ev.corpus,  # decides, revises nothing
                          **cfg.method_knobs(), revise_above=1.0)

    def build(out: Path, scratch: Path) -> dict:
        answers = probe.answer([Query(q.id, q.id, q.text) for q in ev.train])
        correct = NormalisedMatch()([q.text for q in ev.train], [a.text for a in answers],
                                    [q.answers for q in ev.train])
        threshold = calibrate_revise_threshold([a.trace["p_revise"] for a in answers], correct)
        write_json(out, {"revise_above": threshold, "questions": len(answers),
                         "draft_error": 1 - sum(correct) / len(correct)})

    inputs = {"probe": probe.identity(), "questions": [q.id for q in ev.train],
              "answers": [list(q.answers) for q in ev.train]}
    return stage(run_dir(cfg) / f"calibration-{ev.name}.json", inputs, build, read_json)
