"""The layout docs/reference/layout.md shows: packages by concern, dependencies pointing one way."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each package may import only packages earlier in this list (and itself). Entry points last.
LAYERS = [
    "schemas",
    "labeler.ids",
    "labeler.records",
    "labeler.inputs",
    "labeler.checking",
    "labeler.store",
    "labeler.labeling",
    "labeler.importing",
    "labeler.evaluation",
    "labeler.judging",
    "labeler.prm",
    "labeler.decoding",
    "labeler.rewards",
    "labeler.serving",
    "labeler.review",
    "labeler.world",
    "workers",
    "labeler.api",
    "labeler.cli",
]
ENTRY_POINTS = {"labeler.api", "labeler.cli"}  # the only places where labeler/ meets workers/


def package_of(module: str) -> str:
    for layer in sorted(LAYERS, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return module


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "labeler":  # `from labeler import X`: X is a submodule or __version__
                found.update(f"labeler.{alias.name}" for alias in node.names if alias.name != "__version__")
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("labeler", "workers", "schemas")}


def modules() -> dict[str, Path]:
    found = {}
    for top in ("labeler", "workers", "schemas"):
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def test_every_module_belongs_to_a_layer():
    assert [name for name in modules() if package_of(name) not in LAYERS and name != "labeler"] == []


def test_dependencies_point_one_way_and_only_entry_points_reach_workers():
    wrong = []
    for name, path in modules().items():
        mine = package_of(name)
        for target in imports(path):
            theirs = package_of(target)
            if theirs == mine or name == "labeler":
                continue
            if LAYERS.index(theirs) > LAYERS.index(mine) if mine in LAYERS else True:
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_nothing_imports_the_cli_and_labeler_reaches_workers_only_from_entry_points():
    for name, path in modules().items():
        targets = {package_of(target) for target in imports(path)}
        if package_of(name) != "labeler.cli":
            assert "labeler.cli" not in targets, name
        if name.startswith("labeler") and package_of(name) not in ENTRY_POINTS:
            assert "workers" not in targets, name
