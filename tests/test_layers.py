"""DESIGN.md's picture, as the imports show it: capture and connectors produce the canonical
trace, the engine reads only the model, viewers read the model and the results, and the
commands and the demo sit on top. No module imports a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "di"

MODEL, PRODUCERS, ENGINE, VIEWERS, TOP = range(5)
LAYER_NAMES = {MODEL: "model", PRODUCERS: "capture/convert", ENGINE: "engine", VIEWERS: "viewers", TOP: "commands/demo"}
SUBPACKAGES = {
    "capture": PRODUCERS,
    "convert": PRODUCERS,
    "engine": ENGINE,
    "viewers": VIEWERS,
    "demo": TOP,
    "parallel": TOP,
}
MODULES = {"cli": TOP, "__main__": TOP, "warmup": TOP, "plugins": PRODUCERS}
"""Modules at the package's top level belong to the model unless named here (warmup: a command that runs every
layer's kernels; plugins: the
registry of connectors, analyses and panels, which knows the Connector type)."""
API = {"load": PRODUCERS, "save": PRODUCERS, "scan": PRODUCERS, "analyze": ENGINE}
"""What ``from di import NAME`` reaches through the public API; other names are the model's."""


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return ENGINE  # `import di` may reach anything the API offers
    return SUBPACKAGES.get(parts[1], MODULES.get(parts[1], MODEL))


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    """(imported module, its layer) of every absolute import of di in a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, layer_of(a.name)) for a in node.names if a.name.split(".")[0] == "di"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "di":
            if node.module == "di":
                for a in node.names:
                    sub = PACKAGE / a.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").is_file()
                    found.append((f"di.{a.name}", layer_of(f"di.{a.name}") if is_module else API.get(a.name, MODEL)))
            else:
                found.append((node.module, layer_of(node.module)))
    return found


def test_no_module_imports_a_layer_above_its_own() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        own = layer_of(module) if module != "di" else TOP
        for imported, layer in _imports(ast.parse(path.read_text(), str(path))):
            if layer > own:
                wrong.append(f"{module} ({LAYER_NAMES[own]}) imports {imported} ({LAYER_NAMES[layer]})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_violation() -> None:
    tree = ast.parse("from di.viewers.info import render\nimport di\nfrom di import analyze, schema")
    assert _imports(tree) == [
        ("di.viewers.info", VIEWERS),
        ("di", ENGINE),
        ("di.analyze", ENGINE),
        ("di.schema", MODEL),
    ]
    assert layer_of("di.capture.record") == PRODUCERS < layer_of("di.viewers.report.page") == VIEWERS
