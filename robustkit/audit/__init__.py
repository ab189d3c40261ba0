"""``python -m robustkit audit``: the robustness gap of any RAG system (or chat model) under biased
questions. ``endpoints`` turns the system into a kit ``Method``; ``protocol`` asks it each question clean and biased and scores it;
``report`` writes what was found."""
from robustkit.audit.endpoints import RAGEndpoint, ClosedBook
from robustkit.audit.report import write as write_report
from robustkit.audit.protocol import analyse, audit_set, run

__all__ = ["RAGEndpoint", "ClosedBook", "analyse", "audit_set", "run", "write_report"]
