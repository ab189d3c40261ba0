"""robustkit: a notebook-first teaching and reproduction kit for robust RAG."""
__version__ = "0.1.0"
