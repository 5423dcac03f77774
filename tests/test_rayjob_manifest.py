"""docker/rayjob.yaml, the KubeRay RayJob example, checked without a Kubernetes cluster: against a JSON
schema of the RayJob fields (tests/data/kuberay_rayjob_v1.schema.json, which refuses unknown fields),
its entrypoint against `labeler label`'s own flags, and its Ray version and worker count against the
image, the `cluster` extra and the entrypoint; and copies with one typo each must fail."""

import copy
import json
import re
import shlex
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

from labeler.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docker" / "rayjob.yaml"
SCHEMA = json.loads((Path(__file__).parent / "data" / "kuberay_rayjob_v1.schema.json").read_text())


def problems(manifest: dict) -> list[str]:
    """Everything wrong with a RayJob manifest, one line each; empty when it is right."""
    found = [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in jsonschema.Draft202012Validator(SCHEMA).iter_errors(manifest)]
    if found:
        return found
    entrypoint = shlex.split(manifest["spec"]["entrypoint"])
    if entrypoint[:2] != ["labeler", "label"]:
        return [f"spec/entrypoint: not a `labeler label` command: {entrypoint[:2]}"]
    try:
        args = build_parser().parse_args(entrypoint[1:])
    except SystemExit:  # argparse said why on stderr
        return [f"spec/entrypoint: `labeler label` refuses these flags: {manifest['spec']['entrypoint']}"]
    workers = sum(group.get("replicas", 0) for group in manifest["spec"]["rayClusterSpec"].get("workerGroupSpecs", []))
    if args.workers != workers:
        found.append(f"spec/entrypoint: --workers {args.workers}, but the worker groups have {workers} replicas")
    for group in manifest["spec"]["rayClusterSpec"].get("workerGroupSpecs", []):
        gpus = group["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if args.gpus_per_worker is not None and gpus is not None and int(gpus) != args.gpus_per_worker:
            found.append(f"worker group {group['groupName']}: {gpus} GPUs per pod, but --gpus-per-worker {args.gpus_per_worker}")
    return found


@pytest.fixture
def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_manifest_is_a_valid_rayjob_with_a_valid_labeler_command(manifest):
    assert problems(manifest) == []


def test_the_manifest_the_image_and_the_cluster_extra_agree_on_the_ray_version(manifest):
    """Every node of a cluster and its driver must run the same Ray."""
    image_ray = re.search(r"^ARG RAY_VERSION=(\S+)$", (ROOT / "docker" / "Dockerfile").read_text(), re.MULTILINE).group(1)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["cluster"] == [f"ray[default]=={image_ray}"]
    assert manifest["spec"]["rayClusterSpec"]["rayVersion"] == image_ray


def _set(document: dict, path: str, value) -> dict:
    """A copy of `document` with `value` at `path` (keys and list indices split by '/'); a value of
    RENAME renames the last key to the given name instead."""
    changed = copy.deepcopy(document)
    *parents, last = [int(part) if part.isdigit() else part for part in path.split("/")]
    target = changed
    for part in parents:
        target = target[part]
    if isinstance(value, Rename):
        target[value.to] = target.pop(last)
    elif value is DELETE:
        del target[last]
    else:
        target[last] = value
    return changed


class Rename:
    def __init__(self, to: str):
        self.to = to


DELETE = object()
WORKER = "spec/rayClusterSpec/workerGroupSpecs/0"
HEAD = "spec/rayClusterSpec/headGroupSpec"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec/shutdownAfterJobFinishes", Rename("shutdownAfterJobFinish")),  # a misspelled field
        ("spec/rayClusterSpec/workerGroupSpecs", Rename("workerGroupSpec")),
        (f"{HEAD}/template/spec/containers/0/resources", Rename("resource")),
        (f"{HEAD}/template/spec/containers/0/envFrom/0/secretRef", Rename("secretRefs")),
        (f"{WORKER}/template/spec/containers/0/volumeMounts/0/mountPath", Rename("mountpath")),
        (f"{WORKER}/replicas", "4"),  # wrong types
        (f"{HEAD}/rayStartParams/num-cpus", 0),
        ("spec/backoffLimit", -1),
        ("spec/ttlSecondsAfterFinished", "600"),
        (f"{HEAD}/template/spec/containers/0/ports/0/containerPort", "6379"),
        (f"{WORKER}/template/spec/containers/0/resources/limits/memory", "64 GB"),
        ("apiVersion", "ray.io/v1alpha1"),  # wrong values
        ("kind", "RayCluster"),
        (f"{WORKER}/groupName", "GPU workers"),
        ("spec/entrypoint", DELETE),  # a missing field
        (f"{HEAD}/template/spec/containers", []),
        ("spec/entrypoint", "labeler label --input hf:openai/gsm8k --output s3://b/p --wrokers 4"),  # a flag labeler does not have
        ("spec/entrypoint", "labeler label --input hf:openai/gsm8k --output s3://b/p --workers 3 --gpus-per-worker 1"),  # 4 replicas
        ("spec/entrypoint", "labeler label --input hf:openai/gsm8k --output s3://b/p --workers 4 --gpus-per-worker 2"),  # 1 GPU a pod
    ],
)
def test_a_copy_with_one_typo_fails(manifest, path, value):
    broken = _set(manifest, path, value)
    assert problems(broken), f"{path} -> {value!r} went through"
