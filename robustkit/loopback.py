"""Servers on this machine's loopback, for as long as a ``with`` block runs: `transformers serve`
over a model folder or llama-cpp-python's server over a GGUF file (served generators on a CPU),
or any server command such as ``python -m robustkit serve``. The loopback tests and the benchmark
start theirs this way."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def server(command: Callable[[int], list[str]], *, wait: float = 180.0) -> Iterator[str]:
    """Start ``command(port)`` on a free loopback port and yield its base URL
    (``http://127.0.0.1:<port>/v1``) once GET /v1/models answers; at most ``wait`` seconds, then
    a ``RuntimeError`` with what the server printed. Stopped on leaving the block (terminated,
    killed after 10 s)."""
    import httpx

    port = free_port()
    url, argv = f"http://127.0.0.1:{port}/v1", command(port)
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    httpx.get(f"{url}/models", timeout=2).raise_for_status()
                    break
                except httpx.HTTPError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        state = f"exited with {process.returncode}" if process.poll() is not None \
                            else f"did not answer within {wait:.0f} s"
                        raise RuntimeError(f"`{' '.join(argv)}` {state}; it said: {log.read()[-1500:]}") from None
                    time.sleep(1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def transformers_serve(folder: str, *, continuous_batching: bool = False) -> Iterator[str]:
    """`transformers serve` over a model folder, fp32 on the CPU; yields the kit's model choice for
    it, ``openai:<folder>@<url>`` (``rk.start(models={"generator": choice})``)."""
    executable = str(Path(sys.executable).parent / "transformers")
    with server(lambda port: [executable, "serve", folder, "--host", "127.0.0.1", "--port", str(port),
                              "--device", "cpu", "--dtype", "float32", "--log-level", "warning"]
                + ["--continuous-batching"] * continuous_batching) as url:
        yield f"openai:{folder}@{url}"


@contextlib.contextmanager
def llama_cpp_serve(python: str, gguf: str, folder: str) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``, run by ``python``,
    an interpreter that has ``llama-cpp-python[server]``) over a GGUF file, its model named after
    ``folder`` — a folder with the same model's tokenizer, which ``continuation_logprobs`` renders
    chats with. Yields the kit's model choice for it."""
    # as many threads as torch would take (OMP_NUM_THREADS, which `make test` sets per lane)
    threads = os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count() or 1)
    with server(lambda port: [python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", folder,
                              "--logits_all", "true", "--n_ctx", "4096", "--n_threads", threads,
                              "--host", "127.0.0.1", "--port", str(port)]) as url:
        yield f"openai:{folder}@{url}"
