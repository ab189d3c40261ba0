"""The device, the dtype and the GPU's memory plan: every GPU branch that a CPU can decide."""
import pytest

from robustkit import device
from robustkit.device import GB, GPU, GPUMemory, ModelDoesNotFit

T4 = GPU("Tesla T4", 15 * GB, (7, 5))
L4 = GPU("NVIDIA L4", 22 * GB, (8, 9))


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch):
    for name in ("ROBUSTKIT_DTYPE", "ROBUSTKIT_MIXED_PRECISION"):
        monkeypatch.delenv(name, raising=False)


def test_language_models_run_fp32_on_every_cpu_and_bf16_or_fp16_by_gpu_capability(monkeypatch):
    dtype, why = device.model_dtype("cpu")
    assert dtype == "float32" and "every CPU" in why
    assert device.model_dtype("cuda", L4)[0] == "bfloat16"
    dtype, why = device.model_dtype("cuda", T4)
    assert dtype == "float16" and "Tesla T4" in why and "compute capability 7.5" in why
    monkeypatch.setenv("ROBUSTKIT_DTYPE", "bfloat16")
    assert device.model_dtype("cpu") == ("bfloat16", "set by ROBUSTKIT_DTYPE")
    with pytest.raises(ValueError, match="Tesla T4.*has no bf16.*float16 or float32"):
        device.model_dtype("cuda", T4)  # a dtype the device cannot run is refused, naming it
    monkeypatch.setenv("ROBUSTKIT_DTYPE", "float8")
    with pytest.raises(ValueError, match="ROBUSTKIT_DTYPE='float8'"):
        device.model_dtype("cpu")


def test_cross_encoders_train_fp32_on_a_cpu_and_with_autocast_on_a_gpu(monkeypatch):
    assert device.mixed_precision("cpu") == "no"
    assert device.mixed_precision("cuda", L4) == "bf16"
    assert device.mixed_precision("cuda", T4) == "fp16"  # with Accelerate's gradient scaler
    monkeypatch.setenv("ROBUSTKIT_MIXED_PRECISION", "no")
    assert device.mixed_precision("cuda", T4) == "no"  # the way out of an fp16 overflow
    for chosen, card, message in (("bf16", T4, "Tesla T4.*no bf16"), ("fp16", None, "needs a GPU"),
                                  ("fp8", T4, "not one of")):
        monkeypatch.setenv("ROBUSTKIT_MIXED_PRECISION", chosen)
        with pytest.raises(ValueError, match=message):
            device.mixed_precision("cuda" if card else "cpu", card)


def test_cpu_kind_is_read_from_flags_and_capped_by_torchs_kernel_level():
    sapphire = "model name\t: Xeon\nflags\t\t: sse avx2 avx512f avx512_bf16 amx_bf16\n"
    zen2 = "model name\t: EPYC\nflags\t\t: sse avx2\n"
    assert device.parse_cpuinfo(sapphire) == {"model": "Xeon", "isa": "AVX-512", "bf16": True}
    assert device.parse_cpuinfo(zen2) == {"model": "EPYC", "isa": "AVX2", "bf16": False}
    # an AVX-512 machine running torch's AVX2 kernels stands in for an AVX2-only CPU
    capped = device.parse_cpuinfo(sapphire, "AVX2")
    assert capped["isa"] == "AVX2" and not capped["bf16"]
    assert capped["model"] == "Xeon with kernels capped by ATEN_CPU_CAPABILITY=avx2"
    assert device.parse_cpuinfo(zen2, "avx2") == device.parse_cpuinfo(zen2)
    assert device.parse_cpuinfo(zen2, "default")["isa"] == "no AVX2"
    assert device.parse_cpuinfo(sapphire, "avx512")["isa"] == "AVX-512"
    assert device.parse_cpuinfo("")["isa"] == "?"


def test_missing_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(device, "has_gpu", lambda: False)
    with pytest.raises(RuntimeError, match="no GPU"):
        device.pick_device("cuda")


class _Card:
    """A GPU's memory as the plan sees it: what the models it admitted take from the total."""

    def __init__(self, total: float):
        self.total, self.used, self.released = total * GB, 0, []

    def memory(self) -> GPUMemory:
        return GPUMemory(free_bytes=lambda: self.total - self.used, total_bytes=lambda: self.total)

    def load(self, plan: GPUMemory, name: str, gib: float) -> None:
        plan.admit(name, int(gib * GB), evict=lambda: self._release(name, gib))
        self.used += int(gib * GB)

    def _release(self, name, gib):
        self.released.append(name)
        self.used -= int(gib * GB)


def test_the_memory_plan_releases_the_least_recently_used_model_to_make_room(capsys):
    card = _Card(15)  # a T4; the plan keeps 1.5 GiB for activations
    plan = card.memory()
    card.load(plan, "generator 1.5B", 3.1)
    card.load(plan, "teacher 3B", 6.2)
    plan.touch("generator 1.5B")  # the teacher is now the least recently used
    card.load(plan, "critic", 0.7)
    assert card.released == [] and list(plan.resident) == ["teacher 3B", "generator 1.5B", "critic"]
    card.load(plan, "another 4B", 5.0)  # 15 - 10 = 5 free, less the reserve: one must go
    assert card.released == ["teacher 3B"] and "released teacher 3B (6.2 GiB)" in capsys.readouterr().out


def test_a_model_that_cannot_fit_is_refused_naming_it_and_the_memory():
    card = _Card(15)
    plan = card.memory()
    with pytest.raises(ModelDoesNotFit, match=r"Qwen3-14B needs 27.5 GiB.*cannot fit a GPU of 15.0 GiB.*smaller model"):
        card.load(plan, "Qwen3-14B", 27.5)
    card.used = int(12 * GB)  # another process holds 12 GiB the kit cannot release
    with pytest.raises(ModelDoesNotFit, match=r"teacher needs 6.2 GiB.*only 3.0 GiB are free.*another process"):
        card.load(plan, "teacher", 6.2)
