"""One owner for the kit's in-process caches: what is held can be listed and released, caches of
objects built under runs/ follow the runs folder, and no module keeps a cache of its own."""
import ast
from pathlib import Path

import pytest

import robustkit as rk
from robustkit import memo

PACKAGE = Path(rk.__file__).parent


@pytest.fixture
def owner(monkeypatch):
    """An empty registry for the test (the kit's own caches are left as they were)."""
    for name in ("_CACHES", "_HOLDINGS"):
        monkeypatch.setattr(memo, name, {})
    monkeypatch.setattr(memo, "_ON_CLEAR", [])
    return memo


def test_a_cached_function_is_listed_while_it_holds_and_released_by_clear(owner, capsys):
    calls = []

    @owner.cached(4)
    def square(x):
        calls.append(x)
        return x * x

    assert owner.held() == {}  # declared, but holding nothing yet
    assert [square(3), square(3), square(4)] == [9, 9, 16] and calls == [3, 4]
    name = f"{__name__}.{test_a_cached_function_is_listed_while_it_holds_and_released_by_clear.__name__}.<locals>.square"
    assert owner.held() == {name: 2}
    assert owner.clear() == {name: 2}
    assert f"released 2 cached object(s): {name} (2)" in capsys.readouterr().out
    assert owner.held() == {}
    assert square(3) == 9 and calls == [3, 4, 3]  # computed again after the clear


def test_clear_returns_what_was_held_and_empties_registered_dicts_and_runs_callbacks(owner):
    store = owner.holding("tests.loaded", {})
    store["a"], store["b"] = object(), object()
    forgotten = []
    owner.on_clear(lambda: forgotten.append(True))
    assert owner.held() == {"tests.loaded": 2}
    assert owner.clear(verbose=False) == {"tests.loaded": 2}
    assert store == {} and forgotten == [True] and owner.held() == {}


def test_a_cache_of_runs_artifacts_follows_the_runs_folder(owner, monkeypatch, tmp_path):
    built = []

    @owner.cached(4, per_runs_folder=True)
    def critic(variant):
        built.append(variant)
        return object()

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path / "a"))
    first = critic("cft")
    assert critic("cft") is first and built == ["cft"]
    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path / "b"))
    assert critic("cft") is not first and built == ["cft", "cft"]  # the other folder's critic
    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path / "a"))
    assert critic("cft") is first  # the first folder's, still held
    assert sum(owner.held().values()) == 2
    critic.cache_clear()
    assert owner.held() == {}


def test_the_kit_exposes_held_and_clear_at_the_top():
    assert rk.held is memo.held and rk.clear is memo.clear and {"held", "clear"} <= set(dir(rk))


def _module_level_caches(tree: ast.Module) -> list[str]:
    """Module-level ``NAME = {}`` / ``dict()`` / ``OrderedDict()`` not handed to ``memo.holding``."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            empty = (isinstance(value, ast.Dict) and not value.keys) or (
                isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", ""))
                in ("dict", "OrderedDict", "defaultdict") and not value.args)
            if empty:
                found.append(ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target))
    return found


def test_no_module_keeps_a_cache_the_owner_does_not_know():
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "memo.py":
            continue
        source = path.read_text()
        tree = ast.parse(source)
        where = path.relative_to(PACKAGE.parent)
        strays += [f"{where}: functools.{alias.name}" for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) and node.module == "functools"
                   for alias in node.names if alias.name in ("lru_cache", "cache")]
        strays += [f"{where}: functools.{node.attr}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "functools"
                   and node.attr in ("lru_cache", "cache")]
        strays += [f"{where}: {name}" for name in _module_level_caches(tree)]
    assert not strays, f"caches outside robustkit.memo (declare them with memo.cached or memo.holding): {strays}"
