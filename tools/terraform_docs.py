"""Write the inputs and outputs tables of every Terraform module's and example's README from its
variables and outputs: `python -m tools.terraform_docs`. A test fails when a table is out of date.

The tables go between the markers terraform-docs uses, so the prose around them is kept.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import hcl2

TERRAFORM = Path(__file__).parent.parent / "terraform"
BEGIN, END = "<!-- BEGIN_TF_DOCS -->", "<!-- END_TF_DOCS -->"


def parsed(path: Path) -> Any:
    """A .tf file as python-hcl2 reads it, its names and string values unquoted."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {plain(key): plain(item) for key, item in value.items() if key != "__is_block__"}
        if isinstance(value, list):
            return [plain(item) for item in value]
        if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                unquoted: str = json.loads(value)  # a plain string: HCL's escapes are JSON's
            except json.JSONDecodeError:
                return value[1:-1]  # an expression that only starts and ends with a quote
            return unquoted
        return value

    with path.open() as file:
        return plain(hcl2.load(file))


def blocks(root: Path, kind: str) -> dict[str, dict[str, Any]]:
    """Every `variable` or `output` block of a root module, by name, in file order."""
    found: dict[str, dict[str, Any]] = {}
    for file in sorted(root.glob("*.tf")):
        for block in parsed(file).get(kind, []):
            found.update(block)
    return found


def tables(root: Path) -> str:
    """The inputs and outputs tables of one root module, in Markdown."""

    def cell(text: str) -> str:
        return " ".join(str(text).split()).replace("|", "\\|")

    def expression(value: str) -> str:
        return value[2:-1] if value.startswith("${") and value.endswith("}") else value

    lines = ["## Inputs", "", "| name | description | type | default |", "| --- | --- | --- | --- |"]
    for name, variable in blocks(root, "variable").items():
        default = "required" if "default" not in variable else f"`{json.dumps(variable['default'])}`"
        kind = expression(variable.get("type", "any"))
        lines.append(f"| `{name}` | {cell(variable.get('description', ''))} | `{cell(kind)}` | {cell(default)} |")
    lines += ["", "## Outputs", "", "| name | description |", "| --- | --- |"]
    for name, output in blocks(root, "output").items():
        lines.append(f"| `{name}` | {cell(output.get('description', ''))} |")
    return "\n".join(lines)


def roots() -> list[Path]:
    """Every module and example: each folder holding a main.tf."""
    return sorted(file.parent for file in TERRAFORM.rglob("main.tf"))


def rendered(readme: Path) -> str:
    """The README with its generated section made current."""
    text = readme.read_text()
    section = f"{BEGIN}\n{tables(readme.parent)}\n{END}"
    if BEGIN not in text:
        return f"{text.rstrip()}\n\n{section}\n"
    return re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: section, text, flags=re.DOTALL)


def main() -> None:
    for root in roots():
        readme = root / "README.md"
        if not readme.exists():
            sys.exit(f"{readme} is missing: write its prose, then run this again for its tables")
        readme.write_text(rendered(readme))
        print(f"wrote {readme.relative_to(TERRAFORM.parent)}")


if __name__ == "__main__":
    main()
