"""ipywidgets explorers: where moving a slider beats re-running a cell (notebook 04 uses both)."""
from __future__ import annotations

import pandas as pd


def gamma_explorer(results: pd.DataFrame, method: str = "corm", condition: str = "biased"):
    """A γ slider: coverage, selective accuracy and which questions Algorithm 1 abstains on.

    Works on a results table of forced answers with confidences S[0] (``methods.run``, e.g. via
    ``corm.experiments.run_methods``): a question is answered at γ when S[0] ≥ γ, so nothing is
    recomputed.
    """
    import ipywidgets as widgets
    from IPython.display import display

    frame = results[(results["method"] == method) & (results["condition"] == condition)]
    frame = frame.sort_values("confidence")
    slider = widgets.FloatSlider(value=0.0, min=0.0, max=1.0, step=0.01, description="γ",
                                 continuous_update=False, readout_format=".2f")
    out = widgets.Output()

    def show(change=None):
        answered = frame["confidence"] >= slider.value
        with out:
            out.clear_output()
            coverage = answered.mean()
            accuracy = frame.loc[answered, "correct"].mean() if answered.any() else float("nan")
            print(f"{method}, {condition}: coverage {coverage:.1%} ({answered.sum()}/{len(frame)}), "
                  f"selective accuracy {accuracy:.1%} (forced: {frame['correct'].mean():.1%})")
            abstained = frame.loc[~answered, ["confidence", "query", "correct"]]
            print(f"abstains on {len(abstained)} (lowest confidence first; correct = what the forced answer was):")
            display(abstained.head(12).round(3))

    slider.observe(show, names="value")
    show()
    return widgets.VBox([slider, out])


def query_playground(similarity, critic, k: int = 5, example: str = ""):
    """Type a (biased) question: candidates ranked by similarity vs by the critic, with scores.

    ``similarity`` and ``critic`` are ranking methods (``baselines.RerankedRAG`` or CoRM's
    ``RiskAwareRAG``) over the same retriever.
    """
    import ipywidgets as widgets
    from IPython.display import display

    box = widgets.Text(value=example, description="question", layout=widgets.Layout(width="90%"),
                       continuous_update=False)
    out = widgets.Output()

    def show(change=None):
        with out:
            out.clear_output()
            if not box.value.strip():
                return
            tables = []
            for label, system in (("similarity", similarity), ("critic", critic)):
                ids, scores = system.rank([box.value])[0]
                tables.append(pd.DataFrame({f"{label}: passage": [system.corpus[d].title for d in ids[:k]],
                                            f"{label}: score": scores[:k].round(3)}))
            display(pd.concat(tables, axis=1))

    box.observe(show, names="value")
    show()
    return widgets.VBox([box, out])
