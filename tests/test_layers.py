"""The package's folders are its layers (docs/design.md, "Layers"): a module imports from its own
folder or a folder below it, never above, so that a newcomer finds a module's job from where it
lives and a change low in the stack cannot come to depend on what is built on it. Imports under
`TYPE_CHECKING` and inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "bucket_memory"
# Lowest first. The package's own modules (admin, connect, transfer, provision, policy, diffs) sit
# above them, `cli/`, `browser/` and `python -m bucket_memory` above those, and `testing/`, which
# no store module may use, on top.
LAYERS = ("runtime", "format", "objects", "state", "log", "fleet", "files", "history", "records")
_TOP, _FACES, _TESTING = len(LAYERS), len(LAYERS) + 1, len(LAYERS) + 2


def rank(module: str) -> int:
    """The layer of a module of the package, given as its dotted name."""
    folder = module.split(".")[1] if "." in module else ""
    if folder in LAYERS:
        return LAYERS.index(folder)
    return {"cli": _FACES, "browser": _FACES, "__main__": _FACES, "testing": _TESTING}.get(folder, _TOP)


def imported(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """The modules of the package that `source` (the text of `module`) imports, with their lines."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [node.module] if node.module else [alias.name for alias in node.names]
                found += [(node.lineno, ".".join([*base, name])) for name in names]
            elif node.module and node.module.split(".")[0] == "bucket_memory":
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "bucket_memory"]
    return found


def upward(source: str, module: str, is_package: bool = False) -> list[str]:
    """Each import of `module`'s source from a layer above its own."""
    own = rank(module)
    return [
        f"{module} (line {line}) imports {target}"
        for line, target in imported(source, module, is_package)
        if rank(target) > own
    ]


def modules() -> list[tuple[Path, str]]:
    return [
        (path, ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def test_nothing_imports_from_a_layer_above_its_own() -> None:
    found = [
        problem
        for path, module in modules()
        for problem in upward(path.read_text(), module.removesuffix(".__init__"), path.name == "__init__.py")
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("bucket_memory.log.head", "from ..records.store import LogRecordStore\n"),
        ("bucket_memory.format.codec", "def later() -> None:\n    from ..objects import interface\n"),
        (
            "bucket_memory.objects.s3",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..fleet import fleet\n",
        ),
        ("bucket_memory.runtime.deadline", "import bucket_memory.state.state\n"),
        ("bucket_memory.admin", "from .cli.base import app\n"),
        ("bucket_memory.log.batch", "from ..fleet.intents import Intent\n"),
        ("bucket_memory.files.store", "from ..testing.faults import Faults\n"),
    ],
)
def test_an_upward_import_is_caught(module: str, source: str) -> None:
    assert upward(source, module), "a deliberate upward import passed the check"


def test_every_folder_of_the_package_has_a_layer() -> None:
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert folders == {*LAYERS, "cli", "browser", "testing"}
