"""The deploy guides run top to bottom as printed (issue 45): the commands of each page's `sh`
blocks, in order, through one bash with the variables the page sets, against moto where the page
talks to AWS, until the first command that needs a real cloud (or a tool no emulator stands in
for). Each test asserts which command that is, so a step moved, rewritten or broken fails it.

Everything runs in a scratch checkout (the repository's files linked, its Terraform tree copied),
so nothing the commands write (`.terraform/`, state) lands in the repository; the AWS CLI sees
only the emulator's keys, never a profile of the machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bucket_memory.testing.emulators import moto_server

from .terraform import Terraform

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
LAMBDA = "deploy-lambda.md"
CLOUD_RUN = "deploy-cloud-run.md"
TRY_IT = "\n## Try it without"  # the section that runs on the emulators instead of the cloud

# What stops a run, wherever it stands in a command (first word, after a pipe, inside `$(...)`),
# and why no emulator here takes it.
NEEDS_A_CLOUD = {
    "docker": "builds with a Docker daemon (this machine has none) and pushes to a real registry "
    "(moto's ECR has no registry API)",
    "gcloud": "calls Google Cloud's control plane, which no emulator serves",
    "curl": "calls the deployed service's URL",
    "aws lambda invoke": "runs the function's image: moto runs functions only in Docker, and answers an "
    "image function's Invoke with a 500 (and `--cli-binary-format` is AWS CLI v2's, which the guide "
    "assumes; an AWS CLI v1 refuses it)",
}


def flat(command: str) -> str:
    """A command as one line: its backslash-continued lines joined."""
    return re.sub(r"\s*\\\n\s*", " ", command).strip()


def head(command: str) -> str:
    """A command's program and subcommands: its words up to the first option."""
    words = flat(command).split()
    return " ".join(words[: next((n for n, word in enumerate(words) if word.startswith("-")), len(words))])


def _commands(text: str) -> list[str]:
    commands: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        continued = False
        for line in block.splitlines():
            if continued:
                commands[-1] += "\n" + line
            elif line.strip() and not line.lstrip().startswith("#"):
                commands.append(line)
            continued = line.endswith("\\")
    return commands


def deploy_commands(page: str) -> list[str]:
    """The commands of a page's deploy steps (its `sh` blocks before "Try it without ..."), in
    order, each exactly as printed (continuation lines included)."""
    return _commands((DOCS / page).read_text().split(TRY_IT, 1)[0])


def try_it_commands(page: str) -> list[str]:
    """The commands of a page's "Try it without ..." section, in order, as printed."""
    return _commands((DOCS / page).read_text().split(TRY_IT, 1)[1])


def needs_a_cloud(command: str, stood_in: Collection[str] = ()) -> str | None:
    """Why `command` cannot run here (see `NEEDS_A_CLOUD`), or None; `stood_in` names programs a
    test provides a stand-in for."""
    for program, reason in NEEDS_A_CLOUD.items():
        where = rf"(?:^|[|;&(])\s*{re.escape(program)}(?:\s|$)"
        if program.split()[0] not in stood_in and re.search(where, flat(command)):
            return reason
    return None


def commands_run(page: str) -> set[str]:
    """The commands of a page's `sh` blocks the tests below run as printed, each flattened: its
    deploy steps up to the first that needs a cloud (on the Lambda page, every step but those, with
    Docker stood in for), then the "Try it" section's, which run on the emulators."""
    deploy = deploy_commands(page)
    if page == LAMBDA:  # the slow run goes on past the invocation (`the_steps_after_the_invocation`)
        return {flat(command) for command in deploy + try_it_commands(page) if not needs_a_cloud(command, {"docker"})}
    stop = next((n for n, command in enumerate(deploy) if needs_a_cloud(command)), len(deploy))
    return {flat(command) for command in deploy[:stop] + try_it_commands(page)}


@dataclass(frozen=True)
class Run:
    ran: list[str]  # the commands that ran, each flattened to one line, in order
    stopped_at: str | None  # the first command that needs a real cloud (not run), flattened
    variables: dict[str, str]  # what the page's assignments left in the shell
    printed: list[str]  # what each command that ran printed (stdout and stderr)


def run_as_printed(
    commands: list[str],
    *,
    cwd: Path,
    environment: dict[str, str],
    log: Path,
    stood_in: Collection[str] = (),
    answers: str = "",
) -> Run:
    """Run `commands` in order, as printed, in one bash (so each sees the variables and directory
    the ones before it left), until the first that needs a real cloud. Any command that fails
    fails the test, with what it printed. `answers` is what the reader types at a prompt (each
    command reads them afresh)."""
    stop = next((n for n, command in enumerate(commands) if needs_a_cloud(command, stood_in)), len(commands))
    ran = commands[:stop]
    names = sorted({found[1] for command in ran if (found := re.match(r"([A-Z_]+)=", command))})
    log.mkdir(parents=True, exist_ok=True)
    script = ["set -o pipefail"]
    for n, command in enumerate(ran):
        script += [
            "{",
            command,
            f'}} <"$GUIDE_LOG/answers" >"$GUIDE_LOG/{n}.out" 2>&1',
            f'echo $? >"$GUIDE_LOG/{n}.rc"',
            f'[ "$(cat "$GUIDE_LOG/{n}.rc")" = 0 ] || exit 1',
        ]
    script.append(f'for name in {" ".join(names)}; do printf "%s=%s\\n" "$name" "${{!name}}"; done >"$GUIDE_LOG/vars"')
    (log / "script.sh").write_text("\n".join(script) + "\n")
    (log / "answers").write_text(answers)  # each command's own stdin: a prompt read to its end takes no other's answer
    shell = subprocess.run(
        ["bash", str(log / "script.sh")],
        cwd=cwd,
        env={**environment, "GUIDE_LOG": str(log)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    printed = []
    for n, command in enumerate(ran):
        if not (log / f"{n}.rc").exists():
            pytest.fail(f"bash stopped before running, as printed:\n{flat(command)}\n{shell.stderr}")
        printed.append((log / f"{n}.out").read_text())
        if (log / f"{n}.rc").read_text().strip() != "0":
            pytest.fail(f"this command of the guide failed as printed:\n{flat(command)}\n{printed[-1]}")
    assert shell.returncode == 0, shell.stderr
    variables = dict(line.split("=", 1) for line in (log / "vars").read_text().splitlines())
    stopped_at = flat(commands[stop]) if stop < len(commands) else None
    return Run([flat(command) for command in ran], stopped_at, variables, printed)


def checkout(scratch: Path) -> Path:
    """`scratch` as the repository root the guides run from: each of the repository's files linked,
    its Terraform tree copied (unless `Terraform` already copied it there), no hidden ones."""
    scratch.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or (scratch / entry.name).exists():
            continue
        if entry.name == "terraform":
            shutil.copytree(entry, scratch / entry.name, ignore=shutil.ignore_patterns(".terraform", "*.tfstate*"))
        else:
            (scratch / entry.name).symlink_to(entry)
    return scratch


def shell_environment(home: Path, endpoint: str | None = None) -> dict[str, str]:
    """A reader's shell: this machine's, with the project's tools first on PATH, none of its cloud
    settings, AWS config files that do not exist, and, with `endpoint`, the AWS CLI and Terraform's
    provider signed in to that moto (AWS_ENDPOINT_URL, a key pair, a default region)."""
    cloud = ("AWS_", "TF_", "STORAGE_EMULATOR", "GOOGLE_", "CLOUDSDK_")
    own = {"MEMORY_URL", "CONVERSATIONS_URL", "MODEL", "OPENAI_API_KEY", "PYTHONPATH"}
    environment = {key: value for key, value in os.environ.items() if not key.startswith(cloud) and key not in own}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    # The checkout's own code, as its own venv's editable install would give it: a worktree that
    # borrows another checkout's venv would otherwise run that one's (a stale guide would pass).
    environment["PYTHONPATH"] = str(ROOT / "src")
    environment["AWS_CONFIG_FILE"] = str(home / "aws-config")
    environment["AWS_SHARED_CREDENTIALS_FILE"] = str(home / "aws-credentials")
    environment["CHECKPOINT_DISABLE"] = "1"
    if endpoint is not None:
        environment |= {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    return environment


def aws(service: str, endpoint: str, region: str) -> Any:
    """A botocore client of the test's own moto (the session's AWS_ENDPOINT_URL may name another)."""
    import botocore.session

    return botocore.session.get_session().create_client(
        service, region_name=region, endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def expanded(word: str, variables: dict[str, str]) -> str:
    """A word of a command with the page's `$NAME` variables put in."""
    return re.sub(r"\$(\w+)", lambda found: variables[found[1]], word)


def test_the_runner_stops_where_no_emulator_serves() -> None:
    """The stop rule itself: each program it names stops a command wherever it stands in it, and
    nothing else does; a rule that matched nothing would let every test below run too far, or not at all."""
    assert needs_a_cloud("docker build -t x .") and needs_a_cloud('aws ecr get-login-password | docker login "$R"')
    assert needs_a_cloud('terraform apply -var "a=$(gcloud config get-value account)"')
    assert needs_a_cloud("aws lambda invoke --function-name f \\\n  out.json")
    assert needs_a_cloud("docker push x", stood_in={"docker"}) is None
    assert needs_a_cloud("aws ecr create-repository --repository-name docker-images") is None
    assert needs_a_cloud("ACCOUNT=$(aws sts get-caller-identity --query Account --output text)") is None


def test_the_lambda_guide_runs_until_the_image_build(tmp_path: Path) -> None:
    """Steps 0 and 1 of the Lambda guide as printed against moto: the account from `aws sts`, then
    the ECR repository, until `docker build`. A drifted guide breaks it by failing a command (a
    wrong flag, a variable used before it is set), by moving or rewriting the build, or by
    computing a REGISTRY that is not the registry of the repository it creates."""
    repo = checkout(tmp_path / "repo")
    with moto_server() as endpoint:
        run = run_as_printed(
            deploy_commands(LAMBDA), cwd=repo, environment=shell_environment(tmp_path, endpoint), log=tmp_path / "log"
        )
        assert [head(command) for command in run.ran] == [
            "REGION=eu-west-1",
            "ACCOUNT=$(aws sts get-caller-identity",
            "REGISTRY=$ACCOUNT.dkr.ecr.$REGION.amazonaws.com",
            "BUCKET=agent-memory-$ACCOUNT-$REGION",
            "aws ecr create-repository",
        ]
        assert run.variables["BUCKET"] == f"agent-memory-{run.variables['ACCOUNT']}-eu-west-1"
        assert run.stopped_at == (
            "docker build --platform linux/amd64 --provenance=false -f deploy/lambda/Dockerfile "
            "-t bucket-memory-agent ."
        )
        (repository,) = aws("ecr", endpoint, run.variables["REGION"]).describe_repositories()["repositories"]
    assert repository["registryId"] == run.variables["ACCOUNT"]
    assert repository["repositoryUri"] == f"{run.variables['REGISTRY']}/bucket-memory-agent"


def docker_stand_in(arguments: list[str]) -> int:
    """`docker` for the Lambda run on a machine with no Docker daemon (`python -c` runs it): it
    keeps what a daemon would (images built and tagged, registries logged in to), refuses what
    Docker would (a missing Dockerfile, pushing an image never built or tagged, or to a registry
    not logged in to, or to an ECR repository that does not exist), and pushes an image to moto's
    ECR as a manifest, so the steps after it meet the image where the guide put it."""
    state_file = Path(os.environ["DOCKER_STAND_IN"])
    state: dict[str, list[str]] = {"commands": [], "images": [], "logins": [], "pushed": []}
    if state_file.exists():
        state = json.loads(state_file.read_text())
    command, *rest = arguments
    state["commands"].append(command)
    parser = argparse.ArgumentParser(prog=f"docker {command}")
    if command == "build":
        parser.add_argument("--platform", required=True, choices=["linux/amd64", "linux/arm64"])
        parser.add_argument("--provenance", choices=["false", "true"])
        parser.add_argument("-f", dest="file", default="Dockerfile")
        parser.add_argument("-t", dest="tag", required=True)
        parser.add_argument("context")
        options = parser.parse_args(rest)
        if not Path(options.context).is_dir() or not Path(options.file).is_file():
            parser.error(f"no Dockerfile {options.file} or context {options.context} in {Path.cwd()}")
        state["images"].append(options.tag)
    elif command == "login":
        parser.add_argument("--username", required=True)
        parser.add_argument("--password-stdin", action="store_true", required=True)
        parser.add_argument("registry")
        options = parser.parse_args(rest)
        if not sys.stdin.read().strip():
            parser.error("no password on stdin")
        state["logins"].append(options.registry)
    elif command == "tag":
        parser.add_argument("source", choices=state["images"])
        parser.add_argument("target")
        state["images"].append(parser.parse_args(rest).target)
    elif command == "push":
        parser.add_argument("reference", choices=state["images"])
        reference = parser.parse_args(rest).reference
        registry, _, path = reference.partition("/")
        found = re.fullmatch(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com", registry)
        if found is None or registry not in state["logins"]:
            parser.error(f"{registry} is no ECR registry logged in to")
        repository, _, tag = path.rpartition(":")
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": 2,
                "digest": "sha256:" + "0" * 64,
            },
            "layers": [],
        }
        ecr = aws("ecr", os.environ["AWS_ENDPOINT_URL"], found[2])
        ecr.put_image(registryId=found[1], repositoryName=repository, imageManifest=json.dumps(manifest), imageTag=tag)
        state["pushed"].append(reference)
    else:
        parser.error("the stand-in knows build, login, tag and push")
    state_file.write_text(json.dumps(state))
    return 0


@pytest.mark.slow  # the AWS provider waits about a minute on moto's answer for the bucket's lifecycle
def test_the_lambda_guide_deploys_on_moto_and_tears_down(tmp_path: Path) -> None:
    """The Lambda guide top to bottom as printed against moto, with Docker stood in for
    (`docker_stand_in`): steps 0 to 3, with `terraform init` and `terraform apply` (answered yes)
    of the example in the scratch checkout, until `aws lambda invoke`. A drifted guide breaks it by
    failing a command (an input the example lacks, an SSM parameter it does not read, a Dockerfile
    path that moved), by changing the Docker steps, by moving or rewriting the invocation, by
    invoking another function than it deployed, deploying another image than it pushed, looking at
    another memory (step 5) than the function's, or naming a `terraform output` that is none."""
    terraform = Terraform(tmp_path / "repo")
    repo = checkout(tmp_path / "repo")
    stand_in = tmp_path / "bin" / "docker"
    stand_in.parent.mkdir()
    stand_in.write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT))} exec {shlex.quote(sys.executable)} -c "
        '"import sys; from tests.test_guide_runner import docker_stand_in; '
        'sys.exit(docker_stand_in(sys.argv[1:]))" "$@"\n'
    )
    stand_in.chmod(0o755)
    with moto_server() as endpoint:
        environment = shell_environment(tmp_path, endpoint) | {
            "TF_CLI_CONFIG_FILE": terraform.environment["TF_CLI_CONFIG_FILE"],
            "OPENAI_API_KEY": "sk-the-readers-key",
            "DOCKER_STAND_IN": str(tmp_path / "docker.json"),
        }
        environment["PATH"] = f"{stand_in.parent}{os.pathsep}{environment['PATH']}"
        commands = deploy_commands(LAMBDA)
        run = run_as_printed(
            commands, cwd=repo, environment=environment, log=tmp_path / "log", stood_in={"docker"}, answers="yes\n"
        )
        assert [head(command) for command in run.ran] == [
            "REGION=eu-west-1",
            "ACCOUNT=$(aws sts get-caller-identity",
            "REGISTRY=$ACCOUNT.dkr.ecr.$REGION.amazonaws.com",
            "BUCKET=agent-memory-$ACCOUNT-$REGION",
            "aws ecr create-repository",
            "docker build",
            "aws ecr get-login-password",
            'docker tag bucket-memory-agent "$REGISTRY/bucket-memory-agent:1"',
            'docker push "$REGISTRY/bucket-memory-agent:1"',
            "aws ssm put-parameter",
            "export TF_VAR_model=openai:gpt-5-mini TF_VAR_model_api_key_parameter=/agents/openai-key",
            "cd terraform/examples/lambda",
            'export TF_VAR_region="$REGION" TF_VAR_bucket_name="$BUCKET" '
            'TF_VAR_image_uri="$REGISTRY/bucket-memory-agent:1"',
            "terraform init",
            "terraform apply",
        ]
        assert "Apply complete!" in run.printed[-1]
        assert run.stopped_at == (
            'aws lambda invoke --region "$REGION" --function-name bucket-memory-agent --cli-binary-format '
            'raw-in-base64-out --payload \'{"note": "the release moves to friday"}\' answer.json'
        )
        docker = json.loads((tmp_path / "docker.json").read_text())
        assert docker["commands"] == ["build", "login", "tag", "push"]
        invoked = shlex.split(run.stopped_at)
        name = invoked[invoked.index("--function-name") + 1]
        function = aws("lambda", endpoint, run.variables["REGION"]).get_function(FunctionName=name)
        assert [function["Code"]["ImageUri"]] == docker["pushed"], "the function runs the image the guide pushed"
        looked = [command.split()[2:] for command in commands if command.startswith("bucket-memory ")]
        looked_at = {word for words in looked for word in words}
        assert looked_at == {'"$MEMORY"'} and "MEMORY=$(terraform output -raw memory_url)" in commands
        outputs = terraform.outputs("examples/lambda")
        served = function["Configuration"]["Environment"]["Variables"]["MEMORY_URL"]
        assert outputs["memory_url"] == served and served.startswith(f"s3://{run.variables['BUCKET']}/"), served
        named = set(re.findall(r"terraform output (?:-raw )?(\w+)", (DOCS / LAMBDA).read_text()))
        assert named and named <= outputs.keys(), f"the guide names outputs the example lacks: {named - outputs.keys()}"
        the_steps_after_the_invocation(commands, run, served, repo, environment, tmp_path / "after", endpoint)


def the_steps_after_the_invocation(
    commands: list[str], run: Run, served: str, repo: Path, environment: dict[str, str], log: Path, endpoint: str
) -> None:
    """Steps 5 and 6 of the Lambda guide as printed, in a shell that sets again what steps 0 to 3
    set (their assignments, exports and `cd`), with what the invocation would have filed put in the
    memory the function serves: the memory looked at, then everything torn down (issue 56: the
    teardown was never run). The invocation and the curl beside it need a real Lambda."""
    # moto ignores the aws:SecureTransport condition, so the bucket policy's DenyInsecureTransport
    # refuses every request over its plain HTTP (test_terraform.py does the same; the apply below
    # puts the policy back).
    aws("s3", endpoint, run.variables["REGION"]).delete_bucket_policy(Bucket=run.variables["BUCKET"])
    filed = ["bucket-memory", "put", served, "inbox/0001.md", "--principal", "lambda"]
    subprocess.run(filed, input="- the release moves to friday\n", env=environment, check=True, text=True, timeout=120)
    after = [flat(command) for command in commands].index(run.stopped_at or "")
    again = [command for command in commands[:after] if re.match(r"(export |cd |[A-Z_]+=)", command)]
    rest = [command for command in commands[after:] if not needs_a_cloud(command)]
    done = run_as_printed([*again, *rest], cwd=repo, environment=environment, log=log, answers="yes\n")
    assert [head(command) for command in done.ran[len(again) :]] == [
        "MEMORY=$(terraform output",
        'bucket-memory ls "$MEMORY"',
        'bucket-memory log "$MEMORY"',
        "terraform apply",
        "terraform destroy",
        "aws ecr delete-repository",
        "aws ssm delete-parameter",
    ]
    listed, logged, *_ = done.printed[len(again) + 1 :]
    assert "inbox/0001.md" in listed and "lambda" in logged, (listed, logged)
    assert "Destroy complete!" in done.printed[len(again) + 4], done.printed[len(again) + 4]
    region = run.variables["REGION"]
    buckets = {bucket["Name"] for bucket in aws("s3", endpoint, region).list_buckets()["Buckets"]}
    assert run.variables["BUCKET"] not in buckets, "the bucket went, with its memory"
    assert aws("ecr", endpoint, region).describe_repositories()["repositories"] == []
    assert aws("ssm", endpoint, region).describe_parameters()["Parameters"] == []
    assert aws("lambda", endpoint, region).list_functions()["Functions"] == []


def test_the_cloud_run_guide_runs_until_the_first_gcloud(tmp_path: Path) -> None:
    """Step 0 of the Cloud Run guide as printed: its variables, until `gcloud config set project`
    (everything from there on is gcloud or needs its project). A drifted guide breaks it by
    failing an assignment, by moving or rewriting that first gcloud step, or by an IMAGE naming
    another registry or repository than the ones the guide configures and creates in step 1."""
    commands = deploy_commands(CLOUD_RUN)
    run = run_as_printed(
        commands, cwd=checkout(tmp_path / "repo"), environment=shell_environment(tmp_path), log=tmp_path / "log"
    )
    assert [head(command) for command in run.ran] == [
        "PROJECT=acme-agents",
        "REGION=europe-west1",
        "IMAGE=$REGION-docker.pkg.dev/$PROJECT/agents/service:1",
        "BUCKET=$PROJECT-agent-memory",
    ]
    assert run.stopped_at == 'gcloud config set project "$PROJECT"'
    words = [shlex.split(flat(command)) for command in commands]
    (configured,) = next(said[3:] for said in words if said[:3] == ["gcloud", "auth", "configure-docker"])
    created = next(said[4] for said in words if said[:4] == ["gcloud", "artifacts", "repositories", "create"])
    registry, project, repository, _ = run.variables["IMAGE"].split("/")
    assert (registry, project, repository) == (expanded(configured, run.variables), run.variables["PROJECT"], created)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(
    script: str, *, cwd: Path, environment: dict[str, str], ready: Callable[[str], bool]
) -> Iterator[list[str]]:
    """Run a long-running `script` in bash, as a reader leaves one running in a terminal; yields
    the lines it printed up to the one `ready` accepts, and stops its process group on exit."""
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        printed = []
        for line in process.stdout:
            printed.append(line.rstrip("\n"))
            if ready(line):
                break
        else:
            pytest.fail(
                f"this command of the guide exited (code {process.wait()}) as printed:\n{script}\n" + "\n".join(printed)
            )
        yield printed
    finally:
        with suppress(ProcessLookupError):  # the group is gone if the command exited
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_the_cloud_run_service_serves_as_the_guide_runs_it(tmp_path: Path) -> None:
    """The Cloud Run guide's "Try it without Google Cloud" commands as printed: the GCS emulator in
    one shell; in another, its `export` line pasted and the service served with uvicorn (on a free
    port instead of 8080, which another program may hold), which then files a message; then the
    guide's step 5 (`bucket-memory ls` and `log`) shows it. A drifted guide breaks it by a command
    that fails or exits, an app path or variable the service does not take, or a step 5 that looks
    at another memory than the one the service serves."""
    import httpx

    repo = checkout(tmp_path / "repo")
    environment = shell_environment(tmp_path)
    emulator, serve = try_it_commands(CLOUD_RUN)
    assert emulator == "python -m bucket_memory.testing.emulators gcs --bucket acme-agent-memory"
    assert flat(serve).count(" --port 8080") == 1
    with serving(emulator, cwd=repo, environment=environment, ready=lambda line: line.startswith("#")) as printed:
        exports = [line for line in printed if line.startswith("export ")]
        assert exports, printed
        port = free_port()
        service = "\n".join([*exports, serve.replace("--port 8080", f"--port {port}")])
        with (
            serving(service, cwd=repo, environment=environment, ready=lambda line: "startup complete" in line),
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client,
        ):
            health = client.get("/healthz")
            assert health.status_code == 200, health.text
            answer = client.post("/conversations/release-42/messages", json={"message": "ship friday"})
            assert (answer.status_code, answer.json()["answer"]) == (200, "done"), answer.text
        look = [command for command in deploy_commands(CLOUD_RUN) if command.startswith("bucket-memory ")]
        assert {command.split()[2] for command in look} == {'"$MEMORY"'}, "step 5 looks at what Terraform names"
        served = f"MEMORY={health.json()['memory']}"  # what `terraform output -raw memory_url` names there
        run = run_as_printed([*exports, served, *look], cwd=repo, environment=environment, log=tmp_path / "log")
    assert [head(command) for command in run.ran[len(exports) + 1 :]] == [
        'bucket-memory ls "$MEMORY"',
        'bucket-memory log "$MEMORY"',
    ]
    listed, logged = run.printed[len(exports) + 1 :]
    assert re.search(r"notes/0001\.md .* - ship friday", listed), listed
    assert re.search(r"write +notes/0001\.md +cloud-run +release-42", logged), "the service's write, as its run"


@pytest.mark.parametrize(("page", "scheme"), [(LAMBDA, "s3"), (CLOUD_RUN, "gs")])
def test_the_emulator_a_guide_starts_makes_a_bucket_doctor_passes(page: str, scheme: str, tmp_path: Path) -> None:
    """Issue 56: the guides' "Try it" emulator made an unversioned bucket, which `doctor` (and every
    write's warning) then rejected; as printed, it now makes the bucket versioned, as `init` would."""
    repo = checkout(tmp_path / "repo")
    environment = shell_environment(tmp_path)
    emulator = try_it_commands(page)[0]
    bucket = shlex.split(emulator)[shlex.split(emulator).index("--bucket") + 1]
    with serving(emulator, cwd=repo, environment=environment, ready=lambda line: line.startswith("#")) as printed:
        exports = [line for line in printed if line.startswith("export ")]
        doctor = f"bucket-memory doctor {scheme}://{bucket}/teams/blue --principal tester"
        run = run_as_printed([*exports, doctor], cwd=repo, environment=environment, log=tmp_path / "log")
    assert run.printed[-1].startswith("ok: "), run.printed[-1]


@pytest.mark.parametrize(("page", "example"), [(LAMBDA, "lambda"), (CLOUD_RUN, "cloud-run")])
def test_a_guide_tears_down_what_it_made(page: str, example: str) -> None:
    """Issue 56: neither guide said how to remove what it made, and `terraform destroy` stops at a
    bucket that holds memories. Each now ends with a teardown the example's inputs allow: apply
    with force_destroy (passed to the bucket module), then destroy, then the image's repository."""
    commands = [flat(command) for command in deploy_commands(page)]
    teardown = commands[commands.index("terraform apply -var force_destroy=true") :]
    assert teardown[1] == "terraform destroy -var force_destroy=true", teardown
    assert any(re.search(r"repositor(y|ies) delete|delete-repository", command) for command in teardown[2:]), teardown
    main = (ROOT / "terraform" / "examples" / example / "main.tf").read_text()
    assert 'variable "force_destroy"' in main and re.search(r"force_destroy\s*=\s*var\.force_destroy", main)


def test_provider_versions_are_bounded_to_a_major() -> None:
    """Issue 56: `>= 5.30` let a first `terraform init` take a new major nobody tested."""
    constraints = re.findall(
        r'source\s*=\s*"hashicorp/\w+"\s*\n\s*version\s*=\s*"([^"]+)"',
        "\n".join(path.read_text() for path in (ROOT / "terraform").rglob("*.tf")),
    )
    assert len(constraints) == 4 and all(re.fullmatch(r"~> \d+\.\d+", found) for found in constraints), constraints
