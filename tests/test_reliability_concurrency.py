"""Processes sharing ``runs/`` and the cache (two notebooks, a notebook and ``make run``): one
builds an artifact or converts weights while the others wait for it and reuse its result; a
builder killed mid-build leaves the lock to the next, which builds cleanly."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robustkit import artifacts, locks, weights
from robustkit.artifacts import is_current, stage
from robustkit.models import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
WAITS = "this process waits for it"  # the waiting process's line

# A stage whose builder logs each call (pid, and whether a previous output was still there),
# leaves a partial output, then holds on until the test creates the release file.
STAGE_SCRIPT = """
import os, sys, time
from robustkit.artifacts import stage

artifact, log, release = sys.argv[1:4]

def build(out, scratch):
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()} {out.exists()}\\n")
    out.write_text("partial")
    deadline = time.time() + 60
    while not os.path.exists(release) and time.time() < deadline:
        time.sleep(0.02)
    out.write_text(f"built by {os.getpid()}\\n")

print("RESULT", stage(artifact, {"x": 1}, build, lambda p: p.read_text()), end="")
"""

# The GGUF conversion with a stand-in for its heavy part (de-quantising and saving the model).
CONVERT_SCRIPT = """
import json, os, sys, time
from robustkit import weights
from robustkit.models import ModelSpec

log, release = sys.argv[1:3]

def stand_in(spec, dtype, out):
    with open(log, "a") as handle:
        handle.write(f"{os.getpid()} {out.name}\\n")
    (out / "model.safetensors").write_text("weights")
    deadline = time.time() + 60
    while not os.path.exists(release) and time.time() < deadline:
        time.sleep(0.02)
    (out / "config.json").write_text(json.dumps({"converted by": os.getpid()}))

weights._dequantise = stand_in
spec = ModelSpec("generator", "example/tiny-gguf", "/nowhere", "package:example", "tiny.Q4_1.gguf")
print("RESULT", weights.weights_dir(spec, "float32"), end="")
"""

REAL_CONVERT_SCRIPT = """
from robustkit import weights
from robustkit.models import resolve_model

print("RESULT", weights.weights_dir(resolve_model("generator", "tiny"), "float32"), end="")
"""


class Process:
    """A Python process running ``script``, its output (stdout and stderr) in a file."""

    def __init__(self, folder: Path, name: str, script: str, *args, env: dict | None = None):
        self.log = folder / f"{name}.out"
        with open(self.log, "w") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-c", script, *map(str, args)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), "ROBUSTKIT_PROGRESS": "0", **(env or {})},
                # a shell's background job (a CI runner's `cmd &`) ignores SIGINT, and a child would
                # inherit that: Python then raises no KeyboardInterrupt, which one test sends
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.pid = self.popen.pid

    def output(self) -> str:
        return self.log.read_text()

    def result(self) -> str:
        return self.output().split("RESULT ", 1)[1]

    def finish(self, timeout: float = 60) -> int:
        return self.popen.wait(timeout)


@pytest.fixture
def spawn(tmp_path):
    """Start processes; any still running when the test ends is killed."""
    started = []

    def start(name, script, *args, **kwargs):
        started.append(Process(tmp_path, name, script, *args, **kwargs))
        return started[-1]

    yield start
    for process in started:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait()


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_two_processes_building_one_stage_build_it_once_and_read_the_same_bytes(tmp_path, spawn):
    artifact, log, release = tmp_path / "runs" / "a.txt", tmp_path / "builds.log", tmp_path / "release"
    first, second = (spawn(name, STAGE_SCRIPT, artifact, log, release) for name in ("first", "second"))
    wait_for(lambda: lines(log) and any(WAITS in p.output() for p in (first, second)),
             "one process to build while the other waits")
    release.touch()
    assert first.finish() == 0 and second.finish() == 0, first.output() + second.output()
    (build,) = lines(log)  # exactly one build
    builder = int(build.split()[0])
    waiter = second if builder == first.pid else first
    assert f"pid {builder} on {socket.gethostname()} is building {artifact}" in waiter.output()
    assert first.result() == second.result() == artifact.read_text() == f"built by {builder}\n"
    assert is_current(artifact, {"x": 1})


def test_a_builder_killed_mid_build_releases_the_lock_and_the_next_builds_cleanly(tmp_path, spawn):
    artifact, log, release = tmp_path / "runs" / "a.txt", tmp_path / "builds.log", tmp_path / "release"
    killed = spawn("killed", STAGE_SCRIPT, artifact, log, release)
    wait_for(lambda: lines(log), "the first build to start")
    waiting = spawn("waiting", STAGE_SCRIPT, artifact, log, release)
    wait_for(lambda: WAITS in waiting.output(), "the second process to wait")
    assert f"pid {killed.pid} " in waiting.output()
    killed.popen.send_signal(signal.SIGKILL)  # no handler, no cleanup: only the kernel releases the lock
    assert killed.finish() == -signal.SIGKILL
    wait_for(lambda: len(lines(log)) == 2, "the waiting process to build")
    release.touch()
    assert waiting.finish() == 0, waiting.output()
    # the killed builder's partial output was removed before the second build began
    assert lines(log) == [f"{killed.pid} False", f"{waiting.pid} False"]
    assert waiting.result() == artifact.read_text() == f"built by {waiting.pid}\n"
    assert is_current(artifact, {"x": 1})
    assert sorted(p.name for p in artifact.parent.iterdir()) == [".a.txt.lock", "a.txt", "a.txt.manifest.json"]


def test_the_wait_is_interrupted_by_ctrl_c_and_leaves_the_holder_alone(tmp_path, spawn):
    artifact, log, release = tmp_path / "runs" / "a.txt", tmp_path / "builds.log", tmp_path / "release"
    holder = spawn("holder", STAGE_SCRIPT, artifact, log, release)
    wait_for(lambda: lines(log), "the build to start")
    waiting = spawn("waiting", STAGE_SCRIPT, artifact, log, release)
    wait_for(lambda: WAITS in waiting.output(), "the second process to wait")
    waiting.popen.send_signal(signal.SIGINT)  # what a notebook's interrupt and Ctrl-C send
    assert waiting.finish() != 0 and "KeyboardInterrupt" in waiting.output()
    release.touch()
    assert holder.finish() == 0 and holder.result() == f"built by {holder.pid}\n"
    assert len(lines(log)) == 1


def test_two_processes_converting_one_gguf_convert_it_once(tmp_path, spawn):
    log, release, cache = tmp_path / "conversions.log", tmp_path / "release", tmp_path / "cache"
    env = {"ROBUSTKIT_CACHE": str(cache)}
    first, second = (spawn(name, CONVERT_SCRIPT, log, release, env=env) for name in ("first", "second"))
    wait_for(lambda: lines(log) and any(WAITS in p.output() for p in (first, second)),
             "one process to convert while the other waits")
    release.touch()
    assert first.finish() == 0 and second.finish() == 0, first.output() + second.output()
    (conversion,) = lines(log)  # exactly one conversion
    converter, folder = conversion.split()
    waiter = second if int(converter) == first.pid else first
    assert f"pid {converter} on {socket.gethostname()} is converting tiny.Q4_1.gguf" in waiter.output()
    target = cache / "models" / "example--tiny-gguf-float32"
    assert first.result() == second.result() == str(target)
    assert json.loads((target / "config.json").read_text()) == {"converted by": int(converter)}
    # converted in a folder of its own, renamed into place: nothing is left beside the copy
    assert folder.startswith(".example--tiny-gguf-float32.") and folder.endswith(".tmp")
    assert sorted(p.name for p in target.parent.iterdir()) == [f".{target.name}.lock", target.name]


def test_reusing_a_finished_artifact_or_conversion_takes_no_lock(tmp_path, monkeypatch):
    path = tmp_path / "a.txt"
    stage(path, {"x": 1}, lambda out, scratch: out.write_text("v1"), lambda p: p.read_text())

    def no_lock(*args):
        raise AssertionError("a read-only reuse took the lock")

    monkeypatch.setattr(artifacts, "exclusive", no_lock)
    assert stage(path, {"x": 1}, lambda out, scratch: out.write_text("v2"), lambda p: p.read_text()) == "v1"
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    target = tmp_path / "cache" / "models" / "example--tiny-gguf-float32"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    monkeypatch.setattr(weights, "exclusive", no_lock)
    spec = ModelSpec("generator", "example/tiny-gguf", "/nowhere", "package:example", "tiny.Q4_1.gguf")
    assert weights.weights_dir(spec, "float32") == str(target)


def test_without_fcntl_stages_run_unlocked_with_a_notice_printed_once_and_counted(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(locks, "fcntl", None)
    monkeypatch.setattr(locks, "UNLOCKED", [])
    for name in ("a.txt", "b.txt"):
        assert stage(tmp_path / name, {"x": 1}, lambda out, _: out.write_text("v"), Path.read_text) == "v"
    assert capsys.readouterr().out.count("no fcntl") == 1
    assert locks.UNLOCKED == [f"building {tmp_path / 'a.txt'}", f"building {tmp_path / 'b.txt'}"]
    assert not list(tmp_path.glob("*.lock"))


@pytest.mark.slow
def test_two_cold_processes_convert_smollm2_once(tmp_path, spawn):
    """The failure seen: two cold runs converting into one temporary folder at once."""
    env = {"ROBUSTKIT_CACHE": str(tmp_path / "cache")}
    first, second = (spawn(name, REAL_CONVERT_SCRIPT, env=env) for name in ("first", "second"))
    assert first.finish(300) == 0 and second.finish(300) == 0, first.output() + second.output()
    outputs = first.output() + second.output()
    assert outputs.count("[robustkit] converting ") == 1
    assert outputs.count(WAITS) <= 1  # the second to arrive waits, unless the copy was already done
    target = Path(first.result())
    assert second.result() == str(target) and (target / "config.json").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == [f".{target.name}.lock", target.name]


def test_an_fp16_verdict_is_merged_with_what_another_process_recorded_meanwhile(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path))
    record = tmp_path / "fp16_probes.json"

    def probe_while_another_process_records(spec, device):
        record.write_text(json.dumps({"other/model on cpu": False}))  # written during our probe
        return True

    monkeypatch.setattr(weights, "finite_in_fp16", probe_while_another_process_records)
    spec = ModelSpec("generator", "example/model", "/nowhere", "package:example")
    assert weights.fp16_dtype(spec, "cpu", "no bf16") == ("float16", "no bf16")
    assert json.loads(record.read_text()) == {"other/model on cpu": False, "example/model on cpu": True}
