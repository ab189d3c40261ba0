"""The README's "Your own questions and corpus" block, run as written: a researcher's corpus and
questions answered under ``rk.load_only()`` by the scale's trained parts, which are staged first
(as `python -m robustkit run corm` stages them) and then never rebuilt."""
import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def recipe() -> str:
    """The python block that follows the README's "Your own questions and corpus" heading."""
    text = README.read_text()
    after = text[text.index("**Your own questions and corpus**"):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


def test_the_recipe_is_complete_python():
    code = recipe()
    compile(code, "README recipe", "exec")
    assert "..." not in code  # runnable as pasted, no elided passages or questions
    assert "rk.load_only()" in code and "corpus=corpus" in code


@pytest.mark.slow
def test_the_readme_recipe_runs_as_written_under_load_only():
    import robustkit as rk
    from robustkit.artifacts import manifest_path
    from robustkit.corm import train

    trained = train.train_critic(rk.corm.settings("tiny"), "corm")  # staged once, as `run corm` does
    before = manifest_path(trained).read_text()
    scope: dict = {}
    exec(compile(recipe(), "README recipe", "exec"), scope)
    results = scope["results"]
    assert sorted(results["method"].unique()) == ["corm", "dense"]
    assert len(results) == 2 * len(scope["asked"])  # every query, clean and biased, by both methods
    assert {d for ids in results["passage_ids"] for d in ids} <= {"p1", "p2", "p3"}  # the user's corpus only
    assert set(rk.headtohead.significance(results)["type"]) == {"clean", *{r.type for r in scope["rewrites"]}}
    assert manifest_path(trained).read_text() == before  # the critic was read, not retrained
