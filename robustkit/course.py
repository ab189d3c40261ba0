"""What the notebooks use to teach: a written-out core checked equal to the package's answer
(``same``), and an exercise's guess checked against what the run shows (``check``).

Each notebook writes its method's core in plain code, runs it on a few real examples, then calls
``same(mine, package_answer, what=…)``: a mismatch fails the cell (and nbval in CI), so the
written-out version and the package cannot drift apart. Exercises whose answer is a number or a
direction end with ``check(guess, answer, hint=…)``, which says right or wrong without failing.

    import robustkit as rk
    mine = [robustness_utility(x, d) for x, d in pairs]          # the notebook's own code
    rk.course.same(mine, [teacher.utility(x, d) for x, d in pairs], what="s(x, d) on 6 passages")
    rk.course.check(guess, "falls", choices=("rises", "falls"), hint="look at the τ = 0 end")
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Any, Sequence

# where the notebooks link their terms (docs/glossary.md in the repository)
GLOSSARY_URL = "https://github.com/robustkit/robustkit/blob/main/docs/glossary.md"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading — lower case, punctuation dropped ("NDCG@3" →
    "ndcg3"), spaces to '-' — the "#term" of a glossary link, on GitHub and on the course site."""
    kept = "".join(c for c in heading.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


@dataclass(frozen=True)
class Agreement:
    """What ``same`` compared: how many values, and the largest numeric difference."""

    what: str
    values: int
    largest_difference: float

    def __repr__(self) -> str:
        difference = "" if self.largest_difference == 0 else \
            f", largest difference {self.largest_difference:.1e}"
        values = "1 value" if self.values == 1 else f"{self.values} values"
        return f"✓ {self.what}: the written-out version equals the package's ({values}{difference})"


def same(mine: Any, package: Any, *, what: str, atol: float = 0.0) -> Agreement:
    """Assert a written-out result equals the package's on the same inputs.

    Args:
        mine: what the notebook's own code computed — a number, string, bool, None, or a list,
            tuple or dict of them (nested), a numpy array or a torch tensor.
        package: the package's answer on the same inputs, in the same shape.
        what: what is compared, for the message ("s(x, d) on 6 passages").
        atol: the largest absolute difference two numbers may have (0: exactly equal). Use a
            nonzero tolerance only for float noise, and say why in the notebook.

    Returns:
        An ``Agreement`` whose repr is the one line a notebook shows.

    Raises:
        AssertionError: naming the first place the two differ, and both values there.
    """
    if atol < 0:
        raise ValueError(f"atol must be ≥ 0, got {atol}")
    counted = _compare(_plain(mine), _plain(package), atol, where=what)
    return Agreement(what, counted[0], counted[1])


@dataclass(frozen=True)
class Verdict:
    """The outcome of ``check``: ``right`` is None while no guess is written."""

    right: bool | None
    message: str

    def __repr__(self) -> str:
        return self.message


def check(guess: Any, answer: Any, *, hint: str, choices: Sequence[str] | None = None,
          tolerance: float = 0.0) -> Verdict:
    """Say whether an exercise's guess matches what the run shows; never fails a cell.

    Args:
        guess: the student's answer (None while not yet written).
        answer: the answer computed from this run (a choice, a number, or any value).
        hint: one sentence that points to where the answer can be read, shown when wrong.
        choices: the words a direction may take ("rises", "falls"); a guess is compared
            case-insensitively and must be one of them.
        tolerance: for numbers, how far a guess may be from the answer and still count.

    Returns:
        A ``Verdict`` whose repr is the line a notebook shows.
    """
    if choices is not None and answer not in choices:
        raise ValueError(f"the answer {answer!r} is not one of the choices {tuple(choices)}")
    if guess is None:
        options = f" (one of {', '.join(map(repr, choices))})" if choices else ""
        return Verdict(None, f"no guess yet: write yours{options} in the cell above, run it, then this one")
    if choices is not None:
        word = str(guess).strip().lower()
        lowered = {choice.lower(): choice for choice in choices}
        if word not in lowered:
            return Verdict(False, f"{guess!r} is not one of {', '.join(map(repr, choices))}: pick one")
        right = lowered[word] == answer
    elif _is_number(guess) and _is_number(answer):
        right = abs(float(guess) - float(answer)) <= tolerance
    else:
        right = guess == answer
    if right:
        return Verdict(True, f"✓ right: {_shown(answer)}")
    return Verdict(False, f"✗ not this run's answer (you said {_shown(guess)}). Hint: {hint}")


def _plain(value: Any) -> Any:
    """numpy arrays and scalars, torch tensors and pandas objects as plain Python values."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if hasattr(value, "to_dict") and hasattr(value, "index"):  # a pandas Series or DataFrame
        value = value.to_dict()
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _compare(mine: Any, package: Any, atol: float, where: str) -> tuple[int, float]:
    """(values compared, largest numeric difference); AssertionError at the first difference."""
    if isinstance(mine, dict) and isinstance(package, dict):
        if set(mine) != set(package):
            raise AssertionError(f"{where}: keys differ — only in yours {sorted(set(mine) - set(package), key=str)}, "
                                 f"only in the package's {sorted(set(package) - set(mine), key=str)}")
        parts = [_compare(mine[key], package[key], atol, f"{where}[{key!r}]") for key in mine]
        return sum(n for n, _ in parts), max((d for _, d in parts), default=0.0)
    if isinstance(mine, list) and isinstance(package, list):
        if len(mine) != len(package):
            raise AssertionError(f"{where}: yours has {len(mine)} values, the package's {len(package)}")
        parts = [_compare(a, b, atol, f"{where}[{i}]") for i, (a, b) in enumerate(zip(mine, package))]
        return sum(n for n, _ in parts), max((d for _, d in parts), default=0.0)
    if _is_number(mine) and _is_number(package):
        a, b = float(mine), float(package)
        if math.isnan(a) or math.isnan(b):
            if math.isnan(a) and math.isnan(b):
                return 1, 0.0
            raise AssertionError(f"{where}: yours is {mine!r}, the package's {package!r}")
        difference = abs(a - b)
        if difference > atol:
            raise AssertionError(f"{where}: yours is {mine!r}, the package's {package!r} "
                                 f"(difference {difference:.3g}, allowed {atol:g})")
        return 1, difference
    if mine != package or isinstance(mine, bool) != isinstance(package, bool):  # True == 1.0 in Python
        raise AssertionError(f"{where}: yours is {mine!r}, the package's {package!r}")
    return 1, 0.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else repr(value)
