"""The kit's cross-encoder, shared by every method: the model, its losses, its training loop and
the relevance model trained with it.

    model.py      [q ; d] → encoder → CLS → linear → one logit; pre-tokenised groups; the scorer
    loss.py       listwise (ListNet), pointwise (BCE) and CoRM-RAG's hybrid of the two
    loop.py       the kit's one training loop (Accelerate: CPU and GPU, resumable), the NLI model's too
    processes.py  training on several processes: the launch, each one's share of a step, the sums
    train.py      the ranking cross-encoder's training: groups, losses, held-out NDCG and MRR
    groups.py     "contains a gold alias" groups and the split by question
    relevance.py  the relevance cross-encoder: CoRM's warm start, CRAG's retrieval evaluator

    scorer = rk.crossencoder.relevance_scorer(scale)   # trained on demand, reused after
    scorer.score(["who wrote hamlet"], ["Hamlet is a tragedy by William Shakespeare."])

Offline no pretrained cross-encoder exists, so the kit trains one on cheap labels; CoRM-RAG's
Evidence Critic is the same model trained on robustness labels (``corm``). Submodules load on
first use, so the GPU training entry point needs only torch, transformers and accelerate.
"""
from robustkit import lazy_package

MAX_LENGTH = 256  # query + passage tokens of every kit cross-encoder
_SUBMODULES = ("groups", "loop", "loss", "model", "processes", "relevance", "train")
_NAMES = {"CrossEncoder": "model", "CrossEncoderScorer": "model", "RECIPES": "relevance",
          "Recipe": "relevance", "recipe": "relevance", "groups_for": "relevance",
          "relevance_model": "relevance", "relevance_scorer": "relevance"}

__getattr__, __dir__ = lazy_package(__name__, _SUBMODULES, _NAMES)
