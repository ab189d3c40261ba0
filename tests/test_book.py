"""The course site as a reader gets it: `make book` builds it from the committed notebooks (never
re-executed), a loopback server serves it, and a real headless Chromium opens its pages: every
figure a notebook drew renders, widgets show their static view, solutions start collapsed, and
every glossary link lands on a definition on the site itself.

Chromium is Debian's (`apt-get install chromium`: .ci/run installs it); playwright drives it."""
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# a closed network: no background connections, no component updates (each would be refused)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reports failures itself
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site's address on loopback, built by `make book` into a fresh folder."""
    out = tmp_path_factory.mktemp("book")
    build = subprocess.run(["make", "-s", "book", f"BOOK_OUT={out}"], cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, f"make book failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    handler = functools.partial(_QuietHandler, directory=str(out / "_build" / "html"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        message = "no Chromium on this machine: `apt-get install chromium` (Debian) for the site's browser test"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


def _open(browser, site: str, page_path: str):
    """A page opened and its images settled, with the site's own requests that failed."""
    page = browser.new_page()
    failed = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.url.startswith(site) and r.status >= 400
            else None)
    page.on("requestfailed", lambda r: failed.append(f"failed {r.url}") if r.url.startswith(site) else None)
    # CDN scripts (MathJax) are refused on a closed network: wait for the document, then its images
    page.goto(site + page_path, wait_until="domcontentloaded")
    # index.html forwards to README.html by a meta refresh: on a busy machine the document above can
    # be the forwarding one, without the page's <main>, for a while
    page.wait_for_selector("main", timeout=30_000)
    page.wait_for_function("Array.from(document.images).every(image => image.complete)", timeout=30_000)
    return page, failed


def _drawn_figures(notebook: Path) -> int:
    """How many figures (PNG outputs) the committed notebook holds."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum("image/png" in output.get("data", {}) for cell in cells for output in cell.get("outputs", []))


@pytest.fixture(scope="module")
def notebook_pages(browser, site) -> dict[str, dict]:
    """What each notebook's page shows, each page opened once: its figures (address, width), its
    text, its links as written and the site's requests that failed."""
    pages = {}
    for notebook in NOTEBOOKS:
        page, failed = _open(browser, site, f"notebooks/{notebook.stem}.html")
        pages[notebook.stem] = {
            "figures": [image for image in page.eval_on_selector_all(
                ".cell_output img", "images => images.map(i => [i.src, i.naturalWidth])") if image[0].startswith(site)],
            "text": page.inner_text("main"),
            "hrefs": page.eval_on_selector_all("main a[href]", "links => links.map(a => a.getAttribute('href'))"),
            "failed": failed}
        page.close()
    return pages


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem[:2])
def test_a_notebook_page_renders_every_figure_its_run_drew_and_widgets_as_their_static_view(
        notebook_pages, notebook):
    shown = notebook_pages[notebook.stem]
    local = shown["figures"]
    assert len(local) == _drawn_figures(notebook), f"{notebook.name}: {len(local)} figures on the page"
    assert all(width > 0 for _, width in local), [src for src, width in local if not width]
    text = shown["text"]
    assert "VBox(" not in text and "Loading widget" not in text, f"{notebook.name}: a widget with no static view"
    assert not shown["failed"], shown["failed"]


def test_solutions_start_collapsed_and_open_on_a_click(browser, site):
    page, _ = _open(browser, site, "notebooks/02_teacher_labelling.html")
    solutions = page.locator(".cell.tag_solution")
    assert solutions.count() >= 3
    first = solutions.first
    assert not first.locator(".cell_input").is_visible()
    first.locator("summary").first.click()
    assert first.locator(".cell_input").is_visible()
    assert "Solution 1" in first.locator(".cell_input").inner_text()
    page.close()


def test_every_glossary_link_of_the_course_lands_on_a_definition_on_the_site(browser, site, notebook_pages):
    anchors = set()
    for name, shown in notebook_pages.items():
        hrefs = shown["hrefs"]
        assert not [h for h in hrefs if "github.com/robustkit/robustkit/blob/main/docs/" in h], \
            f"{name}: a glossary link that leaves the site"
        anchors |= {h.split("#", 1)[1] for h in hrefs if h.startswith("../docs/glossary.html#")}
    assert len(anchors) >= 40, f"only {len(anchors)} glossary terms linked"
    glossary, failed = _open(browser, site, "docs/glossary.html")
    missing = sorted(a for a in anchors if not glossary.evaluate(f"document.getElementById({a!r}) !== null"))
    assert not missing and not failed, (missing, failed)
    glossary.close()


@pytest.mark.parametrize("page_path", ["index.html", "figures/README.html", "docs/glossary.html"])
def test_every_link_of_a_reference_page_to_a_file_of_the_site_reaches_it(browser, site, page_path):
    """The README (the site's first page) and the results page link figures, CSVs and notebooks."""
    page, failed = _open(browser, site, page_path)
    links = page.eval_on_selector_all("main a[href]", "links => links.map(a => a.href)")
    local = sorted({link.split("#", 1)[0] for link in links if link.startswith(site)})
    broken = [link for link in local if page.request.get(link).status != 200]
    assert local and not broken and not failed, (broken, failed)
    page.close()
