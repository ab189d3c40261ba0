"""What CoRM-RAG trains on and where its runs go: the scale's seeded sample of its training split,
``runs/<scale>/corm/``. (Its test queries' biased rewrites are the adversary's beyond ``tiny``, so
``train.test_set`` builds them as a stage.)
"""
from __future__ import annotations

from pathlib import Path

from robustkit import resources
from robustkit.config import runs_dir
from robustkit.corm.config import CormConfig
from robustkit.data import Question


def run_dir(cfg: CormConfig) -> Path:
    """Where CoRM's artifacts live: ``runs/<scale>/corm/``."""
    path = runs_dir(CormConfig.require(cfg).scale) / "corm"
    path.mkdir(parents=True, exist_ok=True)
    return path


def train_questions(cfg: CormConfig) -> list[Question]:
    """The CoRM training questions: the scale's seeded sample of its training split."""
    return resources.train_questions(CormConfig.require(cfg).scale)
