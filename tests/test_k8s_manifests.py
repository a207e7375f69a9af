"""The Kubernetes manifests in templates/k8s: rendered with default and custom values, every
object validated (built-in kinds through the `kubernetes` client's models, which check types
and required fields, plus a round trip that finds unknown fields; the RayCluster against a
JSON schema written from KubeRay's CRD), and the values checked to land where they should.

No cluster runs here: what an API server would do beyond its schemas (admission, the KubeRay
operator, the CNI enforcing NetworkPolicy) is not exercised.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes")
jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "templates" / "k8s"
SCHEMA = json.loads((K8S / "schemas" / "raycluster.schema.json").read_text())

_spec = importlib.util.spec_from_file_location("owrl_k8s_render", K8S / "render.py")
render_mod = importlib.util.module_from_spec(_spec)
sys.modules["owrl_k8s_render"] = render_mod
_spec.loader.exec_module(render_mod)

#: kind -> (apiVersion, the kubernetes client's model)
BUILT_IN = {
    "Namespace": ("v1", "V1Namespace"),
    "Deployment": ("apps/v1", "V1Deployment"),
    "Service": ("v1", "V1Service"),
    "ConfigMap": ("v1", "V1ConfigMap"),
    "PersistentVolumeClaim": ("v1", "V1PersistentVolumeClaim"),
    "Job": ("batch/v1", "V1Job"),
    "NetworkPolicy": ("networking.k8s.io/v1", "V1NetworkPolicy"),
}

CUSTOM = {
    "namespace": "agents",
    "image": "registry.example/owrl:2.0",
    "browser": {"replicas": 12, "port": 3100, "requests": {"cpu": 4, "memory": "12Gi"},
                "limits": {"cpu": 4, "memory": "12Gi", "ephemeral-storage": "20Gi"}},
    "ray": {"clusterName": "rollouts", "workers": {"replicas": 3, "minReplicas": 2, "maxReplicas": 6,
                                                   "limits": {"cpu": "6", "memory": "24Gi"}}},
    "trainer": {"gpus": 0, "storageClass": "fast-ssd", "limits": {"cpu": "16", "memory": "96Gi"}},
    "network": {"allowedDomains": ["shop.example", "docs.example"],
                "allowedCIDRs": ["203.0.113.0/24", "198.51.100.7/32"], "sitePorts": [443],
                "dnsPodLabels": {"k8s-app": "coredns"}, "workerEgressCIDRs": ["10.20.0.0/16"]},
}


# ============================================================================ validation


def _diff(given: Any, back: Any, where: str) -> list[str]:
    """What of ``given`` did not survive the model's round trip: unknown fields, changed values."""
    if isinstance(given, dict):
        if not isinstance(back, dict):
            return [f"{where}: became {back!r}"]
        out = []
        for key, value in given.items():
            if key not in back:
                out.append(f"{where}.{key}: unknown field")
            else:
                out.extend(_diff(value, back[key], f"{where}.{key}"))
        return out
    if isinstance(given, list):
        if not isinstance(back, list) or len(back) != len(given):
            return [f"{where}: became {back!r}"]
        return [p for i, (g, b) in enumerate(zip(given, back)) for p in _diff(g, b, f"{where}[{i}]")]
    return [] if given == back and type(given) is type(back) else [f"{where}: {given!r} became {back!r}"]


def model_problems(data: dict[str, Any], model: str, where: str) -> list[str]:
    """Problems of ``data`` as a ``model`` (e.g. V1Deployment): types, required fields, unknown fields."""
    api = kubernetes.client.ApiClient()
    try:
        obj = api.deserialize(json.dumps(data), model, "application/json")
    except Exception as err:  # the models' own validation error
        return [f"{where}: {type(err).__name__}: {str(err).splitlines()[0:3]}"]
    return _diff(data, api.sanitize_for_serialization(obj), where)


def problems(obj: dict[str, Any]) -> list[str]:
    kind = obj.get("kind")
    where = f"{kind}/{obj.get('metadata', {}).get('name')}"
    if kind == "RayCluster":
        found = [f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
                 for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(obj)]
        if found:
            return found
        spec = obj["spec"]
        groups = [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec.get("workerGroupSpecs", [])]
        return [p for name, group in groups
                for p in model_problems(group["template"], "V1PodTemplateSpec", f"{where}.{name}.template")]
    if kind not in BUILT_IN:
        return [f"{where}: a kind this test does not know"]
    api_version, model = BUILT_IN[kind]
    if obj.get("apiVersion") != api_version:
        return [f"{where}: apiVersion {obj.get('apiVersion')} is not {api_version}"]
    return model_problems(obj, model, where)


def render(values: dict[str, Any] | None = None, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    base = render_mod.load_values(sets=sets)
    merged = render_mod.merge(base, values or {})
    return render_mod.render(merged, base=ROOT)


def by_kind(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def containers(pod_template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod_template["spec"]["containers"]}


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# ============================================================================ the tests


@pytest.mark.parametrize("values", [None, CUSTOM], ids=["defaults", "custom"])
def test_every_object_validates(values):
    objects = render(values)
    assert sorted(o["kind"] for o in objects) == sorted(
        ["Namespace", "Deployment", "Service", "RayCluster", "ConfigMap", "PersistentVolumeClaim", "Job",
         "NetworkPolicy", "NetworkPolicy"])
    found = [p for o in objects for p in problems(o)]
    assert found == []
    namespace = (values or {}).get("namespace", "owrl")
    assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {namespace}
    # what kubectl apply reads back is what the test validated
    again = list(yaml.safe_load_all(render_mod.to_yaml(objects)))
    assert again == objects


def test_resources_equal_the_values_given():
    objects = by_kind(render(CUSTOM))
    browser = containers(objects["Deployment", "owrl-browser-server"]["spec"]["template"])["browser-server"]
    assert browser["resources"] == {"requests": {"cpu": "4", "memory": "12Gi"},
                                    "limits": {"cpu": "4", "memory": "12Gi", "ephemeral-storage": "20Gi"}}
    assert objects["Deployment", "owrl-browser-server"]["spec"]["replicas"] == 12
    ray = objects["RayCluster", "rollouts"]["spec"]
    (workers,) = ray["workerGroupSpecs"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (3, 2, 6)
    worker = containers(workers["template"])["ray-worker"]
    assert worker["resources"]["limits"] == {"cpu": "6", "memory": "24Gi"}
    assert worker["resources"]["requests"] == {"cpu": "4", "memory": "8Gi"}  # the default, not changed
    trainer = containers(objects["Job", "owrl-train"]["spec"]["template"])["trainer"]
    assert trainer["resources"]["limits"] == {"cpu": "16", "memory": "96Gi"}  # gpus 0: no GPU asked for
    assert objects["PersistentVolumeClaim", "owrl-train-data"]["spec"]["storageClassName"] == "fast-ssd"


def test_defaults_follow_the_documented_figures():
    objects = by_kind(render())
    browser = containers(objects["Deployment", "owrl-browser-server"]["spec"]["template"])["browser-server"]
    # one browser sandbox as OpenWebRL's release ran it, room up to a deployment guide's pod
    assert browser["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "12Gi"}}
    trainer = containers(objects["Job", "owrl-train"]["spec"]["template"])["trainer"]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "storageClassName" not in objects["PersistentVolumeClaim", "owrl-train-data"]["spec"]  # the cluster's default


def test_the_pieces_point_at_each_other():
    objects = by_kind(render(CUSTOM))
    deployment = objects["Deployment", "owrl-browser-server"]
    service = objects["Service", "owrl-browser-server"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert matches(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    assert matches(service["spec"]["selector"], pod_labels)
    browser = containers(deployment["spec"]["template"])["browser-server"]
    assert browser["command"][-2:] == ["--port", "3100"] and "--unsafe" not in browser["command"]
    assert browser["ports"][0]["containerPort"] == 3100 and service["spec"]["ports"][0]["port"] == 3100

    endpoint = "ws://owrl-browser-server.agents.svc.cluster.local:3100/"
    ray = objects["RayCluster", "rollouts"]["spec"]
    trainer_pod = objects["Job", "owrl-train"]["spec"]["template"]
    clients = [ray["headGroupSpec"]["template"], ray["workerGroupSpecs"][0]["template"], trainer_pod]
    for pod in clients:
        for c in containers(pod).values():
            assert env(c)["OWRL_BROWSER_ENDPOINT"] == endpoint
            assert env(c)["OWRL_ALLOWED_DOMAINS"] == "shop.example,docs.example"
            assert c["image"] == "registry.example/owrl:2.0"
    trainer = containers(trainer_pod)["trainer"]
    assert trainer["command"] == ["owrl", "train", "rl", "--config", "/etc/owrl/rl.toml", "--backend", "ray"]
    assert env(trainer)["RAY_ADDRESS"] == "ray://rollouts-head-svc.agents.svc.cluster.local:10001"
    config = objects["ConfigMap", "owrl-train-config"]["data"]["rl.toml"]
    assert config == (ROOT / "examples" / "rl-ray.toml").read_text() and tomllib.loads(config)["suite"]
    assert {v["configMap"]["name"] for v in trainer_pod["spec"]["volumes"] if "configMap" in v} == {"owrl-train-config"}

    # the browser pods take connections only from pods carrying the client label, which all clients carry
    browser_policy = objects["NetworkPolicy", "owrl-browser-server"]["spec"]
    assert matches(browser_policy["podSelector"]["matchLabels"], pod_labels)
    (ingress,) = browser_policy["ingress"]
    assert ingress["ports"] == [{"port": 3100, "protocol": "TCP"}]
    client_selector = ingress["from"][0]["podSelector"]["matchLabels"]
    assert all(matches(client_selector, pod["metadata"]["labels"]) for pod in clients)
    assert not matches(client_selector, pod_labels)


def test_egress_is_denied_except_dns_and_the_allowed_ranges():
    for values in (None, CUSTOM):
        for policy in (o for o in render(values) if o["kind"] == "NetworkPolicy"):
            spec = policy["spec"]
            assert "Egress" in spec["policyTypes"]
            # a rule with no peers would allow every address
            assert all(rule.get("to") for rule in spec["egress"]), policy["metadata"]["name"]

    default = by_kind(render())
    browser_egress = default["NetworkPolicy", "owrl-browser-server"]["spec"]["egress"]
    assert [r["ports"] for r in browser_egress] == [[{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]]

    custom = by_kind(render(CUSTOM))
    dns, sites = custom["NetworkPolicy", "owrl-browser-server"]["spec"]["egress"]
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "coredns"}  # replaced, not merged
    assert [p["ipBlock"]["cidr"] for p in sites["to"]] == ["203.0.113.0/24", "198.51.100.7/32"]
    assert all(ipaddress.ip_network(p["ipBlock"]["cidr"]) for p in sites["to"])
    assert sites["ports"] == [{"port": 443, "protocol": "TCP"}]
    client_rules = custom["NetworkPolicy", "owrl-browser-clients"]["spec"]["egress"]
    peers = [peer for rule in client_rules for peer in rule["to"]]
    assert {"podSelector": {"matchLabels": {"ray.io/cluster": "rollouts"}}} in peers
    assert {"ipBlock": {"cidr": "10.20.0.0/16"}} in peers
    assert not any(p.get("ipBlock", {}).get("cidr") == "203.0.113.0/24" for p in peers)  # sites: the browser's only


def test_the_checks_catch_broken_objects():
    objects = by_kind(render())
    deployment = objects["Deployment", "owrl-browser-server"]

    typo = json.loads(json.dumps(deployment))
    typo["spec"]["replica"] = typo["spec"].pop("replicas")
    assert any("spec.replica: unknown field" in p for p in problems(typo))

    nameless = json.loads(json.dumps(deployment))
    del nameless["spec"]["template"]["spec"]["containers"][0]["name"]
    assert problems(nameless) and "name" in problems(nameless)[0]

    port_as_number = json.loads(json.dumps(deployment))
    port_as_number["spec"]["template"]["spec"]["containers"][0]["command"][-1] = 3000
    assert problems(port_as_number)

    wrong_group = dict(objects["NetworkPolicy", "owrl-browser-server"], apiVersion="extensions/v1beta1")
    assert problems(wrong_group)

    ray = objects["RayCluster", "owrl-rollouts"]
    numeric = json.loads(json.dumps(ray))
    numeric["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0
    assert any("rayStartParams.num-cpus" in p for p in problems(numeric))
    groupless = json.loads(json.dumps(ray))
    del groupless["spec"]["workerGroupSpecs"][0]["groupName"]
    assert any("groupName" in p for p in problems(groupless))
    bad_pod = json.loads(json.dumps(ray))
    bad_pod["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limit"] = {}
    assert any("resources.limit: unknown field" in p for p in problems(bad_pod))


def test_command_line_renders_files_and_refuses_unknown_values(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"browser": {"replicas": 6}}))
    out = tmp_path / "rendered"
    code = render_mod.main(["-f", str(values), "--set", "browser.limits.memory=16Gi", "--set", "ray.workers.replicas=5",
                            "-o", str(out)])
    assert code == 0
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 9 and names[0] == "00-namespace-owrl.yaml"  # kubectl apply -f takes files in name order
    files = {name.split("-", 1)[1]: yaml.safe_load((out / name).read_text()) for name in names}
    deployment = files["deployment-owrl-browser-server.yaml"]
    assert deployment["spec"]["replicas"] == 6
    assert containers(deployment["spec"]["template"])["browser-server"]["resources"]["limits"] == {
        "cpu": "4", "memory": "16Gi"}
    assert files["raycluster-owrl-rollouts.yaml"]["spec"]["workerGroupSpecs"][0]["replicas"] == 5
    assert all(not problems(obj) for obj in files.values())

    assert render_mod.main(["--set", "browser.replica=3"]) == 2
    assert "no values key 'browser.replica'" in capsys.readouterr().err
    values.write_text(yaml.safe_dump({"browsers": {"replicas": 6}}))
    assert render_mod.main(["-f", str(values)]) == 2
    assert "unknown key 'browsers'" in capsys.readouterr().err
    assert render_mod.main(["--set", "trainer.configFile=no/such.toml"]) == 2
    assert "trainer.configFile: no such file" in capsys.readouterr().err
