"""A language model's dtype on a GPU without bf16: fp16 where it stays finite, fp32 (printed and
counted) where it overflows. The probe runs fp16 on a CPU here — the same arithmetic range."""
import shutil

import pytest

from robustkit import weights
from robustkit.config import with_overrides
from robustkit.models import resolve_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2_folder():
    """The kit's converted SmolLM2-135M, a plain transformers folder."""
    return weights.weights_dir(resolve_model("generator", "tiny"), "float32")


def _overflowing_copy(source, target):
    """SmolLM2 with its first MLP's output scaled ×10⁴: activations beyond fp16's ±65,504."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(1e4)
    model.save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
        if (source / name).exists():
            shutil.copy(source / name, target / name)
    return target


def test_fp16_is_kept_where_logits_stay_finite_and_replaced_by_fp32_where_they_overflow(
        smollm2_folder, tmp_path, monkeypatch, capsys):
    from pathlib import Path

    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    sound = resolve_model("generator", with_overrides("tiny", models={"generator": smollm2_folder}))
    assert weights.fp16_dtype(sound, "cpu", "no bf16") == ("float16", "no bf16")
    broken_folder = _overflowing_copy(Path(smollm2_folder), tmp_path / "overflowing")
    broken = resolve_model("teacher", with_overrides("tiny", models={"teacher": str(broken_folder)}))
    before = len(weights.DTYPE_FALLBACKS)
    dtype, why = weights.fp16_dtype(broken, "cpu", "no bf16")
    assert dtype == "float32" and "overflows" in why
    assert weights.DTYPE_FALLBACKS[before:] == [broken.name]
    assert "overflows in fp16" in capsys.readouterr().out
    verdicts = (tmp_path / "cache" / "fp16_probes.json").read_text()
    assert f'"{broken.name} on cpu": false' in verdicts and f'"{sound.name} on cpu": true' in verdicts
    monkeypatch.setattr(weights, "finite_in_fp16", lambda *a: pytest.fail("the verdict is remembered"))
    assert weights.fp16_dtype(broken, "cpu", "no bf16")[0] == "float32"
