import pytest

from robustkit import config


def test_unknown_scale_is_named():
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        config.get_scale("huge")


def test_scale_from_environment(monkeypatch):
    monkeypatch.setenv("ROBUSTKIT_SCALE", "small")
    assert config.get_scale().name == "small"


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


def test_progress_switch(monkeypatch):
    monkeypatch.delenv("ROBUSTKIT_PROGRESS", raising=False)
    monkeypatch.setenv("CI", "true")
    assert not config.show_progress()
    monkeypatch.setenv("ROBUSTKIT_PROGRESS", "1")
    assert config.show_progress()


def test_a_config_shows_as_a_table_of_its_knobs_scale_and_seed_first():
    from robustkit.config import knob_table
    from robustkit.fva.config import settings

    table = knob_table(settings("tiny", tau=0.3))
    assert list(table.index[:2]) == ["scale", "seed"] and table.loc["scale", "value"] == "tiny"
    assert table.loc["tau", "value"] == 0.3 and table.loc["n_mini", "value"] == 8
    assert "scale" not in list(table.index[2:])  # the Scale object itself is not a knob row
