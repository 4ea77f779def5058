"""The package's folders are its layers (docs/design.md, "Layers"): a module imports from its own
folder or a folder below it, never above, so that a newcomer finds a module's job from where it
lives and a change low in the stack cannot come to depend on what is built on it. Imports under
`TYPE_CHECKING` and inside functions count too. Nor does a module reach through an object into
another layer's private parts (an attribute named `_...` that only that layer defines), or past a
store's front door into the machinery behind it (its commit log, housekeeper and fleet, its log's
head and committer: the store's seam stands for them), which the import check cannot see. Nor is a
function longer than a reader can hold at once."""

from __future__ import annotations

import ast
import functools
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


# What a store keeps behind its front door, reached only from the layers that build it: above
# them, `LogFileStore`'s seam (`submit`, `commit`, `state`, `reader`, `objects`, `options`, ...)
# stands for its commit log.
MACHINERY = {"log", "housekeeper", "fleet"}
LOG_MACHINERY = {"head", "committer"}
BEHIND_THE_DOOR = {"log", "fleet", "files"}
# A named tuple's API: public, whatever its underscore says.
NAMED_TUPLE = {"_replace", "_asdict", "_make", "_fields"}


def layer_of(module: str) -> str:
    """The folder a module of the package lives in ("" for the package's own modules)."""
    return module.split(".")[1] if module.count(".") > 1 else ""


def privates(source: str) -> set[str]:
    """The private names (`_...`, not `__...__`) a module's classes define: methods, class
    attributes, and attributes set on `self`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    found |= {target.id for target in item.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            found.add(node.attr)
    return {name for name in found if name.startswith("_") and not name.endswith("__")}


def reaching_in(source: str, module: str, defined: dict[str, set[str]]) -> list[str]:
    """Each attribute chain of `module`'s source into a private name only another layer defines
    (`defined`: layer to the private names its modules define), or past a store's front door."""
    own = layer_of(module)
    tree = ast.parse(source)
    # A module's own attributes (`math.log`) are no store's.
    mine = {"self", "cls"} | {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id in mine) or node.attr in NAMED_TUPLE:
            continue
        chain = f"{module} (line {node.lineno}) reaches {ast.unparse(node)}"
        others = {layer for layer, names in defined.items() if node.attr in names and layer != own}
        if others and node.attr not in defined.get(own, set()):
            found.append(f"{chain}, private to {', '.join(sorted(others))}/")
        elif own not in BEHIND_THE_DOOR and (
            node.attr in MACHINERY or (node.attr in LOG_MACHINERY and _names_a_log(owner))
        ):
            found.append(f"{chain}, behind a store's front door")
    return found


def _names_a_log(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "log") or (isinstance(node, ast.Name) and node.id == "log")


@functools.cache  # parsed once for the whole file: every check below reads it
def private_names() -> dict[str, set[str]]:
    defined: dict[str, set[str]] = {}
    for path, module in modules():
        defined.setdefault(layer_of(module), set()).update(privates(path.read_text()))
    return defined


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


def test_nothing_reaches_into_another_layers_private_parts() -> None:
    defined = private_names()
    found = [problem for path, module in modules() for problem in reaching_in(path.read_text(), module, defined)]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("bucket_memory.admin", "async def compact(store):\n    return await store.housekeeper.compact()\n"),
        ("bucket_memory.records.store", "def seq(files):\n    return files.log.head.seq\n"),
        ("bucket_memory.cli.base", "def queued(store):\n    return store.log._waiting\n"),
        ("bucket_memory.history.chain", "def round_trip(log):\n    return log.committer.settler.round_seconds\n"),
        ("bucket_memory.admin", "def history(store):\n    return History(store.log)\n"),
        (
            "bucket_memory.history.erased_paths",
            "async def listed(self):\n    return await self.store.log.reader.list_log()\n",
        ),
        ("bucket_memory.cli.destroy", "def objects(admin):\n    return admin.store._log.objects\n"),
        (
            "bucket_memory.testing.simulation.forger",
            "async def head(self):\n    return await self.reader.log.proven_state()\n",
        ),
    ],
)
def test_a_reach_into_another_layer_is_caught(module: str, source: str) -> None:
    assert reaching_in(source, module, private_names()), "a deliberate reach past a front door passed the check"


def test_a_modules_own_attribute_is_no_reach() -> None:
    source = (
        "import math\nfrom .files.store import LogFileStore\ndef f(self, store):\n    return math.log(2), self.log\n"
    )
    assert reaching_in(source, "bucket_memory.admin", private_names()) == []


def test_every_folder_of_the_package_has_a_layer() -> None:
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    assert folders == {*LAYERS, "cli", "browser", "testing"}


MAX_FUNCTION_LINES, MAX_CLASS_LINES = 70, 250


def too_long(source: str, module: str) -> list[str]:
    """Each function of `source` over `MAX_FUNCTION_LINES` lines and each class over
    `MAX_CLASS_LINES`, decorators and docstring included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - start + 1
            bound = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
            if lines > bound:
                found.append(f"{module}.{node.name}: {lines} lines")
    return found


def test_no_function_or_class_is_over_its_bound() -> None:
    assert [problem for path, module in modules() for problem in too_long(path.read_text(), module)] == []


def test_a_long_function_is_caught() -> None:
    body = "".join(f"    x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES))
    assert too_long(f"@decorated\ndef commit():\n{body}", "bucket_memory.log.committer") == [
        f"bucket_memory.log.committer.commit: {MAX_FUNCTION_LINES + 2} lines"
    ]
    shorter = "".join(f"    x{n} = {n}\n" for n in range(MAX_FUNCTION_LINES - 1))
    assert too_long(f"def commit():\n{shorter}", "bucket_memory.log.committer") == []
