"""Links on the course site stay on the site. The notebooks link the glossary and the results page
by their GitHub address (a notebook opened on Colab or GitHub has no site beside it); here each
such link to a page the site holds is pointed at that page, anchor kept — and headings get
GitHub's anchors (``robustkit.course.github_anchor``), so that anchor names the same heading on both."""
from __future__ import annotations

from docutils import nodes

from robustkit.course import github_anchor

REPOSITORY = "https://github.com/robustkit/robustkit/blob/main/"


def _site_page(uri: str, pages: set[str]) -> tuple[str, str] | None:
    """(docname, anchor) of a repository address the site holds as a page, else None."""
    if not uri.startswith(REPOSITORY):
        return None
    path, _, anchor = uri[len(REPOSITORY):].partition("#")
    docname = path.rsplit(".", 1)[0]
    return (docname, anchor) if docname in pages else None


def point_at_site(app, doctree, fromdocname: str) -> None:
    pages = set(app.env.found_docs)
    for reference in doctree.findall(nodes.reference):
        target = _site_page(reference.get("refuri", ""), pages)
        if target:
            docname, anchor = target
            uri = app.builder.get_relative_uri(fromdocname, docname)
            reference["refuri"] = uri + (f"#{anchor}" if anchor else "")
            reference["classes"].append("site-link")


def add_github_anchors(app, doctree) -> None:
    """Each heading also answers to GitHub's anchor (Sphinx's own id for "NDCG@3" is "ndcg-3")."""
    for section in doctree.findall(nodes.section):
        slug = github_anchor(section[0].astext())
        if slug and slug not in section["ids"]:
            section["ids"].append(slug)


def setup(app):
    app.connect("doctree-read", add_github_anchors)
    app.connect("doctree-resolved", point_at_site)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
