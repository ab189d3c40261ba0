"""The package's import graph, read from its source: no cycle, imports only down the layers, and no
module reaching into another module's private names.

Nothing is imported (no model loads): every module is parsed with ``ast`` and every import counts,
at module level and inside functions alike. An import deferred into a function is still a
dependency, only a later one: a cycle made of such imports does not crash, it hides coupling.
Relative imports are resolved against the importing module; ``from robustkit.x import y`` is an
import of the module ``robustkit.x.y`` where there is one, else of ``robustkit.x``.

The layers, from the top:

    top     the entry points that compose methods: headtohead, serve, audit, doctor, bench,
            registry, workload, timings, and ``python -m robustkit`` (robustkit.__main__)
    method  corm, fva, counterrefine, alignrag: each imports only the core (and its own folder)
    core    every other module: it imports only the core

The package root (robustkit/__init__.py) is the facade: ``rk.<module>`` loads any module on first
use. ``import robustkit`` (as ``rk``) therefore reaches every layer at once, and only the root and
the top layer may do it; its uses ``rk.corm.labels`` count as imports of the modules they name.
Python imports the root before any submodule, and the root imports no kit module at load time
(checked here), so importing a name the root defines (``__version__``, ``lazy_package``) costs
exactly what that name's own definition imports: those imports, and nothing else, are its edges.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = "robustkit"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE
METHOD_FOLDERS = ("corm", "fva", "counterrefine", "alignrag")
# workload and timings belong to the top layer (they time and run whole methods)
TOP_LAYER = ("headtohead", "serve", "audit", "doctor", "bench", "registry", "workload", "timings",
             "__main__")


@dataclass(frozen=True)
class Import:
    """One kit module (``target``) that ``importer`` imports, where, and which names it takes."""

    importer: str
    target: str
    line: int
    names: tuple[str, ...] = ()  # what it takes from target (from target import a; target.a), if not a module

    def where(self) -> str:
        return f"{_modules()[self.importer].relative_to(PACKAGE_DIR.parent)}:{self.line}"


@lru_cache(1)
def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its folder's name)."""
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _deepest_module(dotted: str) -> str:
    """The longest prefix of ``dotted`` that is a kit module."""
    while dotted not in _modules():
        dotted = dotted.rpartition(".")[0]
    return dotted


def _is_kit(dotted: str) -> bool:
    return dotted == PACKAGE or dotted.startswith(PACKAGE + ".")


def _layer(module: str) -> str:
    """``root``, ``top``, ``method`` or ``core`` (see the module's docstring)."""
    folder = module.split(".")[1] if "." in module else None
    return "root" if folder is None else "top" if folder in TOP_LAYER else \
        "method" if folder in METHOD_FOLDERS else "core"


@lru_cache(1)
def _root_names() -> dict[str, frozenset[str]]:
    """Each name the package root defines → the kit modules its definition imports."""
    names = {}
    for statement in ast.parse(_modules()[PACKAGE].read_text(encoding="utf-8")).body:
        bound = [statement.name] if isinstance(statement, (ast.FunctionDef, ast.ClassDef)) else \
            [t.id for t in getattr(statement, "targets", []) if isinstance(t, ast.Name)]
        targets = frozenset(i.target for i in _imports_in(PACKAGE, statement, root_names={}))
        names.update(dict.fromkeys(bound, targets))
    return names


def _imports_in(module: str, tree: ast.AST, root_names: dict[str, frozenset[str]]) -> list[Import]:
    """The kit imports anywhere in ``tree`` (a module, or one statement of it), and the uses of
    names bound to kit modules (``memo.cached``, ``rk.corm.labels``) as imports of what they name."""
    is_package = _modules()[module].name == "__init__.py"
    found, bound = [], {}  # bound: a local name → the kit module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in (a for a in node.names if _is_kit(a.name)):
                found.append(Import(module, _deepest_module(alias.name), node.lineno))
                bound[alias.asname or alias.name.partition(".")[0]] = \
                    _deepest_module(alias.name) if alias.asname else PACKAGE
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: counted from this module's package (or from this package)
                parts = module.split(".")
                base = ".".join(parts[:len(parts) - node.level + is_package] + ([base] if base else []))
            if not _is_kit(base):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in _modules():
                    found.append(Import(module, submodule, node.lineno))
                    bound[alias.asname or alias.name] = submodule
                else:
                    found.append(Import(module, _deepest_module(base), node.lineno, (alias.name,)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            dotted = ".".join([bound[node.value.id], *_attribute_chain(node)])
            target = _deepest_module(dotted)
            name = dotted[len(target) + 1:].partition(".")[0]
            found.append(Import(module, target, node.lineno, (name,) if name else ()))
    resolved = []
    for i in found:
        if i.target != PACKAGE:
            resolved.append(i)
        elif i.names and i.names[0] in root_names:  # a name the root defines: what its definition imports
            resolved += [Import(module, target, i.line) for target in root_names[i.names[0]]]
        else:  # the whole root, or a name it only re-exports lazily: the facade
            resolved.append(Import(module, PACKAGE, i.line))
    return resolved


def _attribute_chain(node: ast.Attribute) -> list[str]:
    """``rk.corm.labels`` (from its innermost node, ``rk.corm``) → ["corm", "labels"]."""
    while isinstance(getattr(node, "parent", None), ast.Attribute):
        node = node.parent
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    return chain[::-1]


@lru_cache(1)
def _graph() -> list[Import]:
    imports = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):  # parents, for the attribute chains
            for child in ast.iter_child_nodes(node):
                child.parent = node
        imports += [i for i in _imports_in(module, tree, _root_names()) if i.target != module]
    # the root's own imports are its names' (``_root_names``): whoever uses ``rk.start`` imports
    # what ``start`` does, and the root itself stays a leaf
    return [i for i in imports if i.importer != PACKAGE]


def _cycles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    edges = {}
    for i in imports:
        edges.setdefault(i.importer, set()).add(i.target)
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(_modules()):
        if module not in index:
            visit(module)
    return groups


def test_the_package_has_no_import_cycle():
    imports = _graph()
    groups = _cycles(imports)
    first = {}  # (importer, target) → its first import, the one a report names
    for i in imports:
        first.setdefault((i.importer, i.target), i)
    report = "\n\n".join(
        f"{len(group)} modules import one another: {', '.join(group)}\n" + "\n".join(
            f"  {i.where()}  {i.importer} → {i.target}" for (importer, target), i in sorted(first.items())
            if importer in group and target in group)
        for group in groups)
    assert not groups, f"import cycles (move what the lower module needs down to it):\n{report}"


def test_imports_go_down_the_layers_only():
    wrong = []
    for i in (i for i in _graph() if i.target != PACKAGE):  # the whole package: the next test's
        importer, target = _layer(i.importer), _layer(i.target)
        own_folder = i.importer.split(".")[:2] == i.target.split(".")[:2]
        if importer == "core" and target != "core" or \
                importer == "method" and not own_folder and target != "core":
            wrong.append(f"  {i.where()}  {importer} {i.importer} imports {target} {i.target}")
    assert not wrong, ("a method folder imports only the core, and the core only itself; move what is "
                       "shared into the core, or the composing code into the top layer:\n" + "\n".join(wrong))


def test_only_the_root_and_the_top_layer_import_the_whole_package():
    facades = [f"  {i.where()}  {i.importer}" for i in _graph()
               if i.target == PACKAGE and _layer(i.importer) not in ("root", "top")]
    assert not facades, ("`import robustkit` reaches every layer at once; import the modules used "
                         "instead (from robustkit.x import y):\n" + "\n".join(facades))


def test_the_root_imports_no_kit_module_at_load_time():
    root = ast.parse(_modules()[PACKAGE].read_text(encoding="utf-8"))
    loaded = [i for statement in root.body if isinstance(statement, (ast.Import, ast.ImportFrom))
              for i in _imports_in(PACKAGE, statement, root_names={})]
    assert not loaded, f"robustkit/__init__.py imports {[i.target for i in loaded]} at load time: " \
                       "every submodule import would load them; import them where they are used"


def test_no_module_imports_another_modules_private_names():
    private = lambda name: name.startswith("_") and not (name.startswith("__") and name.endswith("__"))  # noqa: E731
    found = [f"  {i.where()}  {i.importer} uses {i.target}.{name}"
             for i in _graph() for name in i.names if private(name)]
    assert not found, ("a name starting with _ is its module's own; make it public (and say so in its "
                       "docstring) or move it to the module that uses it:\n" + "\n".join(found))
