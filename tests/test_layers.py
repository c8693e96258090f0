"""The package's shape holds: no import circles, no arrow from a lower layer up, and a root
that keeps only the public entry points (layers in tools/layers.py and docs/ARCHITECTURE.md)."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "layers.py"


@pytest.fixture(scope="module")
def layers():
    spec = importlib.util.spec_from_file_location("contextd_layers", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graph(layers):
    mods = layers.modules()
    return mods, layers.imports(mods)


def test_no_import_circles(layers, graph):
    mods, edges = graph
    assert layers.circles(edges, mods) == []


def test_no_arrow_from_a_lower_layer_up(layers, graph):
    _, edges = graph
    assert layers.upward(edges) == []


def test_every_module_has_a_layer(layers, graph):
    mods, _ = graph
    for name in mods:
        layers.layer_of(name)  # raises LookupError naming the module


def test_the_root_keeps_only_the_public_entry_points(layers):
    assert set(layers.root_modules()) == layers.ROOT_MODULES


def test_the_checks_see_lazy_imports_and_circles(layers, tmp_path):
    """The checks themselves catch what they are for: an import inside a function that
    closes a circle, and a foundation module importing the CLI."""
    package = tmp_path / "contextd"
    (package / "store").mkdir(parents=True)
    (package / "cli").mkdir()
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("")
    (package / "cli" / "__init__.py").write_text("from contextd.store import base\n")
    (package / "store" / "base.py").write_text(textwrap.dedent("""\
        def later():
            from contextd.cli import main
        """))
    (package / "cli" / "main.py").write_text("")
    mods = layers.modules(package)
    edges = layers.imports(mods)
    assert ("contextd.store.base", "contextd.cli.main") in layers.upward(edges)
    (package / "cli" / "main.py").write_text("import contextd.store.base\n")
    edges = layers.imports(layers.modules(package))
    assert layers.circles(edges, mods) == [["contextd.cli.main", "contextd.store.base"]]
