"""Notebook views: ipywidgets explorers, where moving a slider or picking a question beats
re-running a cell (notebooks 04-08), and ``print_records`` for rows too wide for a table.

Every explorer is returned as an ``Explorer``: a live notebook shows its controls, and a static
view of the same notebook (GitHub, nbviewer, the course site, a committed output) shows the state
it opened on, as text and tables, instead of ``VBox(...)``."""
from __future__ import annotations

import textwrap
from typing import Sequence

import pandas as pd


def print_records(frame: pd.DataFrame, columns: Sequence[str] | None = None, title: str | None = None,
                  width: int = 100) -> None:
    """Each row of ``frame`` as a block of wrapped ``column: value`` lines — for rows of long text
    (critiques, rationales) that a table would squeeze into a few hundred characters' width.
    ``title`` names a column whose value heads each block."""
    for number, (_, row) in enumerate(frame.iterrows(), 1):
        print(f"--- {number}" + (f": {row[title]}" if title else ""))
        for column in columns or [c for c in frame.columns if c != title]:
            print(textwrap.fill(f"{column}: {row[column]}", width, subsequent_indent="    "))


class Explorer:
    """An ipywidgets view and the state it opened on: the widget for a live frontend, the opening
    state (what its first render printed and displayed) as HTML and text for a static one. A
    frontend picks the richest form it can show, so each reader gets one of the two."""

    def __init__(self, widget, opening, title: str):
        self.widget, self.opening, self.title = widget, opening, title

    def _repr_mimebundle_(self, include=None, exclude=None):
        import html

        shown = [output.data for output in self.opening.outputs]
        printed = self.opening.stdout.rstrip()
        note = f"{self.title}, as it opens (run the notebook to move its controls)"
        text = "\n".join([note, printed, *(data.get("text/plain", "") for data in shown)]).rstrip()
        page = "".join([f"<p><em>{html.escape(note)}</em></p>",
                        f"<pre>{html.escape(printed)}</pre>" if printed else "",
                        *(data.get("text/html") or f"<pre>{html.escape(data.get('text/plain', ''))}</pre>"
                          for data in shown)])
        return {**self.widget._repr_mimebundle_(), "text/plain": text, "text/html": page}


def _explorer(controls: list, render, title: str) -> Explorer:
    """Controls above an output area that ``render()`` (it prints and displays) fills, again
    whenever a control moves; the first render is kept as the explorer's static view."""
    import ipywidgets as widgets
    from IPython.utils.capture import capture_output

    out = widgets.Output()

    def show(change=None):
        with out:
            out.clear_output()
            render()

    for control in controls:
        control.observe(show, names="value")
    with capture_output() as opening:
        render()
    with out:
        opening.show()
    return Explorer(widgets.VBox([*controls, out]), opening, title)


def gamma_explorer(results: pd.DataFrame, method: str = "corm", condition: str = "biased",
                   gamma: float = 0.0):
    """A γ slider, starting at ``gamma``: coverage, selective accuracy and which questions
    Algorithm 1 abstains on.

    Works on a results table of forced answers with confidences S[0] (``methods.run``, e.g. via
    ``corm.pipeline.run_methods``): a question is answered at γ when S[0] ≥ γ, so nothing is
    recomputed. The static view (a saved notebook, the course site) shows the state at ``gamma``:
    start it where there is something to see, such as the γ chosen on validation questions.
    """
    import ipywidgets as widgets
    from IPython.display import display

    frame = results[(results["method"] == method) & (results["condition"] == condition)]
    frame = frame.sort_values("confidence")
    slider = widgets.FloatSlider(value=gamma, min=0.0, max=1.0, step=0.01, description="γ",
                                 continuous_update=False, readout_format=".2f")

    def render():
        answered = frame["confidence"] >= slider.value
        coverage = answered.mean()
        accuracy = frame.loc[answered, "correct"].mean() if answered.any() else float("nan")
        print(f"{method}, {condition}: coverage {coverage:.1%} ({answered.sum()}/{len(frame)}), "
              f"selective accuracy {accuracy:.1%} (forced: {frame['correct'].mean():.1%})")
        abstained = frame.loc[~answered, ["confidence", "query", "correct"]]
        print(f"abstains on {len(abstained)} (lowest confidence first; correct = what the forced answer was):")
        display(abstained.head(12).round(3))

    return _explorer([slider], render, f"γ explorer ({method}, {condition})")


def query_playground(similarity, critic, k: int = 5, example: str = ""):
    """Type a (biased) question: candidates ranked by similarity vs by the critic, with scores.

    ``similarity`` and ``critic`` are ranking methods (``baselines.RerankedRAG`` or CoRM's
    ``RiskAwareRAG``) over the same retriever.
    """
    import ipywidgets as widgets
    from IPython.display import display

    box = widgets.Text(value=example, description="question", layout=widgets.Layout(width="90%"),
                       continuous_update=False)

    def render():
        if not box.value.strip():
            return
        tables = []
        for label, system in (("similarity", similarity), ("critic", critic)):
            ids, scores = system.rank([box.value])[0]
            tables.append(pd.DataFrame({f"{label}: passage": [system.corpus[d].title for d in ids[:k]],
                                        f"{label}: score": scores[:k].round(3)}))
        display(pd.concat(tables, axis=1))

    return _explorer([box], render, "query playground")


def falsification_explorer(results: pd.DataFrame, corpora: dict, dataset: str | None = None,
                           revisions: pd.DataFrame | None = None):
    """FVA-RAG step by step: pick a question and a cache to see draft → kill queries →
    anti-context with contradiction scores → verdict → revision; a τ slider shows, from the
    recorded scores (nothing recomputed), which drafts that τ would falsify and the rate, and with
    ``revisions`` (``fva.pipeline.revisions_at_any_tau``) the accuracy at that τ and the revision
    this question would get.

    ``results`` is ``fva.pipeline.run``'s table; ``corpora`` maps (dataset, cache) to its corpus.
    """
    import ipywidgets as widgets

    fva = results[results["method"] == "fva-rag"]
    if dataset:
        fva = fva[fva["dataset"] == dataset]
    fva = fva.reset_index(drop=True)
    traces = list(fva["trace"])
    worst = pd.Series([t["max_contradiction"] for t in traces])
    has_anti_context = pd.Series([bool(t["anti_context_ids"]) for t in traces])
    if revisions is not None:
        revisions = fva[["dataset", "cache", "question_id"]].merge(
            revisions, on=["dataset", "cache", "question_id"], how="left", validate="one_to_one")
    labels = [(f"[{r.dataset}/{r.cache}] {r.query[:70]}", i) for i, r in fva.iterrows()]
    pick = widgets.Dropdown(options=labels, description="question", layout=widgets.Layout(width="95%"))
    tau = widgets.FloatSlider(value=float(traces[0]["tau"]) if traces else 0.5,
                              min=0.0, max=1.0, step=0.05, description="τ", continuous_update=False)

    def render():
        row, trace = fva.iloc[pick.value], traces[pick.value]
        corpus = corpora[(row["dataset"], row["cache"])]
        print(f"Q: {row['query']}\ndraft: {trace['draft']}\nkill queries "
              f"({trace['kill_query_templates']} from templates):")
        for query in trace["kill_queries"]:
            print(f"  - {query}")
        print("anti-context, P(contradiction):")
        for doc, score in zip(trace["anti_context_ids"], trace["contradiction"]):
            print(f"  {score:.3f}  {corpus[doc].content[:110]}")
        score = trace["max_contradiction"]
        verdict = "FALSIFIED" if score >= tau.value else "robust"
        print(f"max {score:.3f} vs τ = {tau.value:.2f} → {verdict} (the run used τ = {trace['tau']}: "
              f"{trace['verdict']})")
        if trace["revision"] is not None:
            print(f"revision: {trace['revision']}")
        elif revisions is not None and revisions["written for the curve"].iloc[pick.value]:
            print(f"revision if falsified (written for the τ curve): {revisions['revision'].iloc[pick.value]}")
        print(f"final answer true by TruthfulQA's rule: {bool(row['correct'])}")
        falsified = has_anti_context & (worst >= tau.value)  # FVA-RAG's rule (fva.method.is_falsified)
        print(f"\nat τ = {tau.value:.2f}: {100 * falsified.mean():.1f}% of {len(fva)} drafts would be falsified")
        if revisions is not None:
            correct = revisions["revision correct"].where(falsified, revisions["draft correct"])
            print(f"  and {100 * correct.mean():.1f}% of answers true (the run at τ = {trace['tau']}: "
                  f"{100 * fva['correct'].mean():.1f}%)")

    return _explorer([pick, tau], render if len(fva) else _nothing_to_explore, "FVA-RAG explorer")


def refinement_explorer(results: pd.DataFrame, corpora: dict, method: str = "counterrefine"):
    """CounterRefine step by step: pick a question (and a variant) to see draft → second-pass
    queries → snippets with the queries that found them → decision → validation → final answer.

    ``results`` is ``counterrefine.pipeline.run``'s table; ``corpora`` maps dataset to its corpus.
    """
    import ipywidgets as widgets

    variants = [m for m in results["method"].unique() if m != "dense"]
    rows = results[results["method"] == method].reset_index(drop=True)
    labels = [(f"[{r.dataset}] {'✓' if r.correct else '✗'} {r.query[:70]}", i) for i, r in rows.iterrows()]
    pick = widgets.Dropdown(options=labels, description="question", layout=widgets.Layout(width="95%"))
    variant = widgets.Dropdown(options=variants, value=method, description="variant")

    def render():
        base = rows.iloc[pick.value]
        row = results[(results["method"] == variant.value) & (results["dataset"] == base["dataset"])
                      & (results["question_id"] == base["question_id"])].iloc[0]
        trace, corpus = row["trace"], corpora[row["dataset"]]
        print(f"Q ({trace['question_type']}): {row['query']}   gold: {row['answers'][0]}")
        print(f"draft: {trace['draft']}\nsecond-pass queries ({trace['second_pass']}):")
        for j, query in enumerate(trace["queries"]):
            print(f"  q{j}: {query[:110]}")
        print("snippets [id] found by:")
        for i, (doc, found) in enumerate(zip(row["passage_ids"], trace["found_by"]), 1):
            print(f"  [{i}] {','.join(f'q{j}' for j in found) or 'draft':8} {corpus[doc].content[:100]}")
        p = f" (P(REVISE) {trace['p_revise']:.3f})" if trace.get("p_revise") is not None else ""
        print(f"reply{p}:\n  " + trace["reply"].replace("\n", "\n  "))
        print(f"validation: {trace['validation']}  →  final: {row['answer']}  "
              f"({'correct' if row['correct'] else 'wrong'}; the draft was "
              f"{'correct' if _draft_correct(results, row) else 'wrong'})")

    return _explorer([pick, variant], render if len(rows) else _nothing_to_explore, "CounterRefine explorer")


def _nothing_to_explore():
    print("nothing to explore: the table has no rows")


def _draft_correct(results: pd.DataFrame, row) -> bool:
    base = results[(results["method"] == "dense") & (results["dataset"] == row["dataset"])
                   & (results["question_id"] == row["question_id"])]
    return bool(base["correct"].iloc[0])


def trajectory_explorer(results: pd.DataFrame):
    """AlignRAG round by round: pick a question and a refiner to see each round's critique, the
    rationale it led to and the answer (``alignrag.pipeline.run``'s table)."""
    import ipywidgets as widgets

    refiners = [m for m in results["method"].unique() if results.loc[results["method"] == m, "iteration"].max() > 0]
    start = results[results["iteration"] == 0].drop_duplicates("question_id").reset_index(drop=True)
    labels = [(f"[{r.dataset}] {r.question[:70]}", r.question_id) for r in start.itertuples()]
    pick = widgets.Dropdown(options=labels, description="question", layout=widgets.Layout(width="95%"))
    refiner = widgets.Dropdown(options=refiners, description="refiner",
                               value="alignrag" if "alignrag" in refiners else refiners[0])

    def render():
        rows = results[(results["question_id"] == pick.value) & (results["method"] == refiner.value)]
        first = rows.iloc[0]
        print(f"Q: {first['question']}   gold: {first['gold'][0]}   "
              f"retrieval: {'informative' if first['informative'] else 'noisy'}")
        for r in rows.sort_values("iteration").itertuples():
            if r.iteration:
                print(f"  critique {r.iteration}: {r.critique}")
            print(f"  y{r.iteration} {'✓' if r.correct else '✗'}  reasoning: {r.rationale}\n"
                  f"      answer: {r.answer}")

    return _explorer([pick, refiner], render if labels else _nothing_to_explore, "AlignRAG explorer")


def headtohead_explorer(results: pd.DataFrame, corpus):
    """Every method on one query, side by side: pick a query (✓ counts the methods that got it
    right) to see each method's answer, its first answer where it has one, the first passage it
    read, its cost and the short fields of its trace (a verdict, an action, a validation …).

    ``results`` is ``headtohead.run``'s table; ``corpus`` the scale's (``resources.corpus_for``)."""
    import ipywidgets as widgets
    from IPython.display import display

    from robustkit.methods import first_answer

    queries = results.drop_duplicates("query_id")
    right = results.groupby("query_id")["correct"].sum()
    methods = results["method"].nunique()
    labels = [(f"[{r.type}] {int(right[r.query_id])}/{methods} ✓  {r.query[:80]}", r.query_id)
              for r in queries.itertuples()]
    pick = widgets.Dropdown(options=labels, description="query", layout=widgets.Layout(width="95%"))

    def short(trace: dict) -> str:  # a trace's scalar fields, the lists and long texts left out
        return "; ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in trace.items()
                         if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 30)

    def render():
        rows = results[results["query_id"] == pick.value]
        print(f"{rows['query'].iloc[0]}\ngold: {', '.join(rows['answers'].iloc[0])}")
        view = pd.DataFrame({
            "method": rows["method"], "answer": rows["answer"].str.slice(0, 60),
            "correct": rows["correct"].map({1.0: "✓", 0.0: "✗"}).where(~rows["abstained"], "abstained"),
            "first answer": [(first_answer(t) or "")[:40] for t in rows["trace"]],
            "first passage read": [corpus[ids[0]].title[:30] if len(ids) else "" for ids in rows["passage_ids"]],
            "model calls": rows["model_calls"], "retrieval calls": rows["retrieval_calls"],
            "trace": [short(t)[:90] for t in rows["trace"]]})
        with pd.option_context("display.max_colwidth", 90):
            display(view.set_index("method"))

    return _explorer([pick], render, "head-to-head explorer")
