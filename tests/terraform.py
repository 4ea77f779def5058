"""The real `terraform` binary, installing providers only from a local filesystem mirror.

Tests run it on a copy of `terraform/` so that no `.terraform/`, lock file or state lands in the
repository. Where the binary or a mirror with the hashicorp/aws provider is absent, they skip and
say which is missing and how to provide it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

TERRAFORM_TREE = Path(__file__).parent.parent / "terraform"
# Where machine images put an unpacked provider mirror; TF_PLUGIN_MIRROR names another.
MIRROR_PLACES = ("/opt/tf-plugins", "/usr/share/terraform/plugins", "~/.terraform.d/plugins")
AWS_PROVIDER = "registry.terraform.io/hashicorp/aws"


def provider_mirror(provider: str = AWS_PROVIDER) -> Path | None:
    """The first mirror holding `provider`, in the unpacked layout (HOSTNAME/NAMESPACE/TYPE/VERSION/...)."""
    places = [os.environ.get("TF_PLUGIN_MIRROR"), *MIRROR_PLACES]
    for place in places:
        if place and (Path(place).expanduser() / provider).is_dir():
            return Path(place).expanduser()
    return None


class Terraform:
    """`terraform` in a scratch copy of the project's Terraform tree, with a CLI config naming only the mirror.

    Every command runs non-interactively and fails the test with terraform's own output.
    """

    def __init__(self, scratch: Path) -> None:
        binary, mirror = shutil.which("terraform"), provider_mirror()
        if binary is None:
            pytest.skip("terraform is not on PATH: install Terraform >= 1.5 to run the Terraform tests")
        if mirror is None:
            pytest.skip(
                f"no provider mirror holding {AWS_PROVIDER} in TF_PLUGIN_MIRROR or {', '.join(MIRROR_PLACES)}: "
                "run `terraform providers mirror DIR` on a connected machine and set TF_PLUGIN_MIRROR=DIR"
            )
        self.binary = binary
        self.tree = scratch / "terraform"
        shutil.copytree(TERRAFORM_TREE, self.tree, ignore=shutil.ignore_patterns(".terraform", "*.tfstate*"))
        config = scratch / "terraformrc"
        config.write_text(
            "provider_installation {\n"
            f'  filesystem_mirror {{\n    path    = "{mirror}"\n    include = ["{AWS_PROVIDER}"]\n  }}\n'
            "}\n"
        )
        self.environment = {
            **os.environ,
            "TF_CLI_CONFIG_FILE": str(config),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
        }

    def __call__(self, directory: str, *arguments: str) -> str:
        """What the command printed; a failure fails the test."""
        completed = self._run(directory, arguments)
        if completed.returncode != 0:
            pytest.fail(f"terraform {' '.join(arguments)} in {directory} failed:\n{completed.stdout}{completed.stderr}")
        return completed.stdout

    def refused(self, directory: str, *arguments: str) -> str:
        """What a command that must fail printed; its success fails the test."""
        completed = self._run(directory, arguments)
        if completed.returncode == 0:
            pytest.fail(f"terraform {' '.join(arguments)} in {directory} succeeded:\n{completed.stdout}")
        return completed.stdout + completed.stderr

    def _run(self, directory: str, arguments: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, f"-chdir={self.tree / directory}", *arguments, "-no-color"],
            env=self.environment,
            capture_output=True,
            text=True,
            check=False,
        )

    def outputs(self, directory: str) -> dict[str, Any]:
        """`terraform output -json`, each output's value."""
        answer = json.loads(self(directory, "output", "-json"))
        return {name: output["value"] for name, output in answer.items()}
