"""The KubeRay RayService (issue #14): the file is what the generator makes, it satisfies the
RayService CRD kept beside it, and its embedded Serve config is cluster/serve_config.yaml."""
import copy

import jsonschema
import pytest
import yaml

from cluster import kuberay, serve_config


def _schema() -> dict:
    crd = yaml.safe_load(kuberay.CRD.read_text(encoding="utf-8"))
    assert crd["spec"]["names"]["kind"] == "RayService"
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]


def _k8s(schema):
    """The CRD's OpenAPI v3 schema as JSON schema: Kubernetes' `x-kubernetes-int-or-string`
    allows an integer or a string where it says `string`."""
    if isinstance(schema, dict):
        out = {k: _k8s(v) for k, v in schema.items() if not k.startswith("x-kubernetes")}
        if schema.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        return out
    if isinstance(schema, list):
        return [_k8s(v) for v in schema]
    return schema


MANIFEST = yaml.safe_load(kuberay.PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft7Validator(_k8s(_schema()))


def test_the_file_is_what_the_generator_makes():
    assert kuberay.PATH.read_text(encoding="utf-8") == kuberay.render(), \
        "run `python -m cluster.kuberay > cluster/kuberay/rayservice.yaml`"


def test_the_manifest_satisfies_the_rayservice_crd():
    errors = [f"{list(e.path)}: {e.message}" for e in VALIDATOR.iter_errors(MANIFEST)]
    assert errors == []


@pytest.mark.parametrize("broken", ["no_group_name", "bad_auth_mode", "replicas_as_text"])
def test_the_schema_check_catches_a_broken_manifest(broken):
    m = copy.deepcopy(MANIFEST)
    rc = m["spec"]["rayClusterConfig"]
    if broken == "no_group_name":
        del rc["workerGroupSpecs"][0]["groupName"]
    elif broken == "bad_auth_mode":
        rc["authOptions"]["mode"] = "sometimes"
    else:
        rc["workerGroupSpecs"][0]["replicas"] = "two"
    assert list(VALIDATOR.iter_errors(m))


def test_the_embedded_serve_config_is_the_serve_config_file():
    embedded = yaml.safe_load(MANIFEST["spec"]["serveConfigV2"])
    assert embedded == yaml.safe_load(serve_config.PATH.read_text(encoding="utf-8"))
    rc = MANIFEST["spec"]["rayClusterConfig"]
    assert rc["authOptions"] == {"mode": "token"}
    groups = {g["groupName"]: g for g in rc["workerGroupSpecs"]}
    assert set(groups) == {"cpu", "gpu"} and groups["gpu"]["replicas"] == 0
    gpu = groups["gpu"]["template"]["spec"]["containers"][0]
    assert gpu["resources"]["limits"]["nvidia.com/gpu"] == "1"
    for c in [rc["headGroupSpec"]["template"]["spec"]["containers"][0], gpu]:
        assert {e["name"] for e in c["env"] if "valueFrom" in e} == {"DATABASE_URL", "REDIS_URL"}
