"""The Kubernetes manifests in templates/k8s: rendered with default and custom values, every
object validated (built-in kinds through the `kubernetes` client's models, which check types
and required fields, plus a round trip that finds unknown fields; the RayCluster and the
RayJobs against JSON schemas written from KubeRay's CRDs), and the values checked to land
where they should. The RayJobs' entrypoints are read as the submitter's shell and then Ray's
job supervisor read them, and the network policies are evaluated for the connections a
RayJob needs (the submitter to the head's dashboard, its workers to their head and browsers).

No cluster runs here: what an API server would do beyond its schemas (admission, the KubeRay
operator, the CNI enforcing NetworkPolicy) is not exercised.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import shlex
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
RAYJOB_SCHEMA = json.loads((K8S / "schemas" / "rayjob.schema.json").read_text())

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

#: both RayJobs on, everything else the defaults
JOBS = {"rayJobs": {"eval": {"enabled": True, "suite": "my-sites"}, "train": {"enabled": True}}}

#: both RayJobs on with values of their own, over CUSTOM; quotes, spaces and $ to show the quoting
CUSTOM_JOBS = {
    **CUSTOM,
    "rayJobs": {
        "submissionMode": "HTTPMode",
        "submitter": {"limits": {"cpu": "2", "memory": "2Gi"}},
        "runtimeEnv": {"env_vars": {"HF_HUB_OFFLINE": "1"}},
        "eval": {"enabled": True, "name": "nightly-eval", "suite": "/srv/tasks/shop tasks.jsonl",
                 "policy": "openwebrl", "model": "/models/owrl $v2", "judge": "rules", "episodes": 3,
                 "workers": 12, "contexts": 2, "out": "/results/it's nightly", "failUnder": 0.4,
                 "extraArgs": ["--tasks", "cart,search"], "activeDeadlineSeconds": 3600},
        "train": {"enabled": True, "name": "rl-run-2", "extraArgs": ["--learning-rate", 2e-5],
                  "activeDeadlineSeconds": 86400, "ttlSecondsAfterFinished": 60,
                  "workers": {"replicas": 16, "minReplicas": 16, "maxReplicas": 20,
                              "requests": {"cpu": "2", "memory": "6Gi"}, "limits": {"cpu": "2", "memory": "6Gi"}}},
    },
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


def schema_problems(obj: dict[str, Any], schema: dict[str, Any], where: str) -> list[str]:
    return [f"{where}: {'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(obj)]


def problems(obj: dict[str, Any]) -> list[str]:
    kind = obj.get("kind")
    where = f"{kind}/{obj.get('metadata', {}).get('name')}"
    if kind == "RayJob":
        found = schema_problems(obj, RAYJOB_SCHEMA, where)
        if found:
            return found
        spec = obj["spec"]
        if "submitterPodTemplate" in spec:
            found += model_problems(spec["submitterPodTemplate"], "V1PodTemplateSpec", f"{where}.submitterPodTemplate")
        if "rayClusterSpec" in spec:  # the cluster it creates: a RayCluster's spec, pod templates included
            cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"].get("namespace")},
                       "spec": spec["rayClusterSpec"]}
            found += [p.replace(f"RayCluster/{obj['metadata']['name']}", f"{where}.rayClusterSpec", 1)
                      for p in problems(cluster)]
        return found
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


def reaches(policies: list[dict[str, Any]], src: dict[str, str], dst: dict[str, str], port: int) -> bool:
    """Whether the NetworkPolicies let a pod labelled ``src`` open a TCP connection to a pod
    labelled ``dst`` in the same namespace on ``port``: allowed by the egress of every policy
    that selects the source, and by the ingress of every policy that selects the target (a pod
    no policy of that direction selects is not restricted in it)."""

    def allowed(direction: str, selected: dict[str, str], other: dict[str, str]) -> bool:
        specs = [p["spec"] for p in policies if direction in p["spec"]["policyTypes"]
                 and matches(p["spec"]["podSelector"].get("matchLabels", {}), selected)]
        peers_key = "to" if direction == "Egress" else "from"
        return not specs or any(
            (not rule.get("ports") or any(p.get("port") == port for p in rule["ports"]))
            and any("podSelector" in peer and "namespaceSelector" not in peer
                    and matches(peer["podSelector"].get("matchLabels", {}), other) for peer in rule[peers_key])
            for spec in specs for rule in spec.get(direction.lower(), []))

    return allowed("Egress", src, dst) and allowed("Ingress", dst, src)


def ray_pod_labels(template: dict[str, Any], cluster: str, node_type: str) -> dict[str, str]:
    """A Ray pod's labels as KubeRay writes them: the template's, its cluster's name, its node type."""
    return {**template["metadata"].get("labels", {}), "ray.io/cluster": cluster, "ray.io/node-type": node_type}


def shell_words(line: str) -> list[str]:
    """The words a POSIX shell makes of ``line``, refusing an operator outside quotes (``&&``,
    ``;``, ``|``, a redirection): in K8sJobMode the submitter's bash would run it itself."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    operators = [w for w in words if w and set(w) <= set("();<>|&")]
    assert not operators, f"shell operators outside quotes in {line!r}: {operators}"
    return shlex.split(line)


def run_argv(entrypoint: str) -> list[str]:
    """The command a RayJob's entrypoint runs, read as the way there reads it: the submitter's
    bash splits it into ``ray job submit -- WORDS``, ``ray job submit`` joins the words again
    (shlex.join), and the job supervisor hands that line to a shell."""
    submitted = shell_words(entrypoint)
    # every word quoted as shlex.quote does: no $, backquote or glob left for a shell to expand
    assert shlex.join(submitted) == entrypoint, f"not quoted word by word: {entrypoint!r}"
    return shell_words(shlex.join(submitted))


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


def test_any_resource_name_is_accepted_in_requests_and_limits(tmp_path, monkeypatch, capsys):
    """docs/deploy-k8s.md: a key the defaults do not have is an error, except inside requests and
    limits (any resource name) and network.dnsPodLabels, from a values file or a --set."""
    monkeypatch.chdir(ROOT)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"trainer": {"requests": {"ephemeral-storage": "20Gi"}},
                                      "network": {"dnsPodLabels": {"app": "coredns"}}}))
    out = tmp_path / "rendered"
    assert render_mod.main(["-f", str(values), "--set", "browser.limits.ephemeral-storage=10Gi", "-o", str(out)]) == 0
    files = {p.name.split("-", 1)[1]: yaml.safe_load(p.read_text()) for p in out.iterdir()}
    browser = containers(files["deployment-owrl-browser-server.yaml"]["spec"]["template"])["browser-server"]
    assert browser["resources"]["limits"]["ephemeral-storage"] == "10Gi"
    assert "ephemeral-storage: 20Gi" in "".join(p.read_text() for p in out.iterdir())
    assert all(not problems(obj) for obj in files.values())
    values.write_text(yaml.safe_dump({"trainer": {"request": {"cpu": 2}}}))  # a misspelt mapping is still refused
    assert render_mod.main(["-f", str(values)]) == 2
    assert "unknown key 'trainer.request'" in capsys.readouterr().err


# ============================================================================ the RayJobs


def rayjobs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The RayJobs by role: 'eval' targets a cluster (clusterSelector), 'train' brings its own."""
    found = [o for o in objects if o["kind"] == "RayJob"]
    return {("eval" if "clusterSelector" in o["spec"] else "train"): o for o in found}


@pytest.mark.parametrize("values", [JOBS, CUSTOM_JOBS], ids=["defaults", "custom"])
def test_rayjobs_validate(values):
    objects = render(values)
    assert sorted(o["kind"] for o in objects) == sorted(
        ["Namespace", "Deployment", "Service", "RayCluster", "ConfigMap", "PersistentVolumeClaim", "RayJob", "RayJob",
         "NetworkPolicy", "NetworkPolicy"])  # the trainer Job is left out: the RayJob trains instead
    found = [p for o in objects for p in problems(o)]
    assert found == []
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] != "Namespace"} == {values.get("namespace", "owrl")}
    again = list(yaml.safe_load_all(render_mod.to_yaml(objects)))
    assert again == objects
    jobs = rayjobs(objects)
    # the submitter's Kubernetes Job takes its RayJob's name: none may be the trainer Job's
    names = [j["metadata"]["name"] for j in jobs.values()]
    assert len(set(names)) == 2 and "owrl-train" not in names
    # retries, deletion and deadlines as given, within what KubeRay accepts for each mode
    ev, tr = jobs["eval"]["spec"], jobs["train"]["spec"]
    assert ev["shutdownAfterJobFinishes"] is False and "backoffLimit" not in ev and "ttlSecondsAfterFinished" not in ev
    assert tr["shutdownAfterJobFinishes"] is True and tr["backoffLimit"] == 2
    if values is CUSTOM_JOBS:
        assert (ev["activeDeadlineSeconds"], tr["activeDeadlineSeconds"], tr["ttlSecondsAfterFinished"]) == (3600, 86400, 60)
        assert ev["submissionMode"] == tr["submissionMode"] == "HTTPMode"
        assert yaml.safe_load(ev["runtimeEnvYAML"]) == yaml.safe_load(tr["runtimeEnvYAML"]) == {
            "env_vars": {"HF_HUB_OFFLINE": "1"}}
        submitter = containers(tr["submitterPodTemplate"])["ray-job-submitter"]
        assert submitter["resources"] == {"requests": {"cpu": "500m", "memory": "512Mi"},
                                          "limits": {"cpu": "2", "memory": "2Gi"}}
        assert submitter["image"] == "registry.example/owrl:2.0"
    else:
        assert (ev["activeDeadlineSeconds"], tr["ttlSecondsAfterFinished"]) == (21600, 300)
        assert "activeDeadlineSeconds" not in tr  # null: no deadline
        assert ev["submissionMode"] == "K8sJobMode" and "runtimeEnvYAML" not in ev


def test_rayjobs_are_rendered_only_on_request(tmp_path, monkeypatch):
    default = by_kind(render())
    assert not any(kind == "RayJob" for kind, _ in default) and ("Job", "owrl-train") in default
    eval_only = by_kind(render({"rayJobs": {"eval": {"enabled": True, "suite": "my-sites"}}}))
    assert [name for kind, name in eval_only if kind == "RayJob"] == ["owrl-eval"] and ("Job", "owrl-train") in eval_only
    train_only = by_kind(render({"rayJobs": {"train": {"enabled": True}}}))
    assert [name for kind, name in train_only if kind == "RayJob"] == ["owrl-train-rl"]
    assert ("Job", "owrl-train") not in train_only  # never two runs training into the same volume
    assert ("ConfigMap", "owrl-train-config") in train_only and ("PersistentVolumeClaim", "owrl-train-data") in train_only

    monkeypatch.chdir(ROOT)
    out = tmp_path / "rendered"
    assert render_mod.main(["--set", "rayJobs.eval.enabled=true", "--set", "rayJobs.eval.suite=my-sites", "-o", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names[-1] == "09-rayjob-owrl-eval.yaml" and len(names) == 10  # after the RayCluster it runs on
    assert not problems(yaml.safe_load((out / names[-1]).read_text()))


def test_rayjob_entrypoints_run_owrl_with_the_values():
    jobs = rayjobs(render(CUSTOM_JOBS))
    assert run_argv(jobs["eval"]["spec"]["entrypoint"]) == [
        "owrl", "eval", "--suite", "/srv/tasks/shop tasks.jsonl", "--policy", "openwebrl", "--model", "/models/owrl $v2",
        "--judge", "rules", "--episodes", "3", "--backend", "ray", "--workers", "12", "--contexts", "2",
        "--out", "/results/it's nightly", "--fail-under", "0.4", "--tasks", "cart,search"]
    sh, dash_c, script = run_argv(jobs["train"]["spec"]["entrypoint"])
    assert (sh, dash_c) == ("sh", "-c")
    # the one script sh runs: into the volume, as the trainer Job's workingDir (the config's
    # relative paths land there), then owrl in sh's place, its words quoted
    train = ["owrl", "train", "rl", "--config", "/etc/owrl/rl.toml", "--backend", "ray", "--learning-rate", "2e-05"]
    assert script == "cd /data && exec " + shlex.join(train)

    default = rayjobs(render(JOBS))
    assert run_argv(default["eval"]["spec"]["entrypoint"]) == [
        "owrl", "eval", "--suite", "my-sites", "--judge", "composite", "--episodes", "1", "--backend", "ray",
        "--workers", "8", "--contexts", "1", "--out", "/tmp/owrl-eval/my-sites-default"]
    assert run_argv(default["train"]["spec"]["entrypoint"]) == [
        "sh", "-c", "cd /data && exec owrl train rl --config /etc/owrl/rl.toml --backend ray"]
    # the config the trainer reads is the ConfigMap's, mounted where the entrypoint looks
    head = default["train"]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]
    mounts = {m["name"]: m["mountPath"] for m in containers(head)["ray-head"]["volumeMounts"]}
    assert mounts == {"config": "/etc/owrl", "data": "/data"}

    # The driver joins the cluster it runs on through the RAY_ADDRESS that Ray's job supervisor
    # sets (owrl_sdk.scheduling.raybackend reads it when no address is given): nothing may name another.
    for values in (JOBS, CUSTOM_JOBS):
        objects = by_kind(render(values))
        for job in rayjobs(list(objects.values())).values():
            assert "--ray-address" not in job["spec"]["entrypoint"]
            assert "RAY_ADDRESS" not in job["spec"].get("runtimeEnvYAML", "")
            spec = job["spec"].get("rayClusterSpec")
            templates = ([spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]
                         if spec else [])
            for template in templates:
                assert all("RAY_ADDRESS" not in env(c) for c in containers(template).values())
        cluster = objects["RayCluster", (values.get("ray") or {}).get("clusterName", "owrl-rollouts")]["spec"]
        for template in [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]:
            assert all("RAY_ADDRESS" not in env(c) for c in containers(template).values())


def test_eval_rayjob_runs_on_the_ray_cluster():
    for values in (JOBS, CUSTOM_JOBS):
        objects = render(values)
        (cluster,) = [o for o in objects if o["kind"] == "RayCluster"]
        job = rayjobs(objects)["eval"]
        assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
        assert job["metadata"]["namespace"] == cluster["metadata"]["namespace"]  # KubeRay looks in the job's namespace
        assert "rayClusterSpec" not in job["spec"]
    # so the episodes run on the workers that carry the browser endpoint and the client label
    objects = by_kind(render(CUSTOM_JOBS))
    workers = objects["RayCluster", "rollouts"]["spec"]["workerGroupSpecs"][0]["template"]
    assert env(containers(workers)["ray-worker"])["OWRL_BROWSER_ENDPOINT"] == (
        "ws://owrl-browser-server.agents.svc.cluster.local:3100/")


def test_train_rayjob_cluster_is_the_trainer_and_its_rollout_workers():
    objects = by_kind(render(CUSTOM_JOBS))
    spec = rayjobs(list(objects.values()))["train"]["spec"]["rayClusterSpec"]
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"  # no rollout worker beside the learner
    trainer = containers(head["template"])["ray-head"]
    assert trainer["resources"] == {"requests": {"cpu": "4", "memory": "32Gi"}, "limits": {"cpu": "16", "memory": "96Gi"}}
    volumes = {v["name"]: v for v in head["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == objects["ConfigMap", "owrl-train-config"]["metadata"]["name"]
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "owrl-train-data"
    assert ("PersistentVolumeClaim", "owrl-train-data") in objects
    (group,) = spec["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (16, 16, 20)
    worker = containers(group["template"])["ray-worker"]
    assert worker["resources"] == {"requests": {"cpu": "2", "memory": "6Gi"}, "limits": {"cpu": "2", "memory": "6Gi"}}
    assert spec["rayVersion"] == objects["RayCluster", "rollouts"]["spec"]["rayVersion"]
    for c in (trainer, worker):
        assert env(c) == {"OWRL_BROWSER_ENDPOINT": "ws://owrl-browser-server.agents.svc.cluster.local:3100/",
                          "OWRL_ALLOWED_DOMAINS": "shop.example,docs.example"}
        assert c["image"] == "registry.example/owrl:2.0"

    default = rayjobs(render(JOBS))["train"]["spec"]["rayClusterSpec"]
    assert containers(default["headGroupSpec"]["template"])["ray-head"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # the example config's 32 Ray workers fit the default group: one CPU each
    config = tomllib.loads((ROOT / "examples" / "rl-ray.toml").read_text())
    (group,) = default["workerGroupSpecs"]
    assert config["workers"] <= group["replicas"] * int(containers(group["template"])["ray-worker"]["resources"]["limits"]["cpu"])
    assert "ray_address" not in config


@pytest.mark.parametrize("values", [JOBS, CUSTOM_JOBS], ids=["defaults", "custom"])
def test_network_policies_let_the_rayjobs_connect(values):
    objects = by_kind(render(values))
    policies = [o for (kind, _), o in objects.items() if kind == "NetworkPolicy"]
    jobs = rayjobs(list(objects.values()))
    cluster = next(o for (kind, _), o in objects.items() if kind == "RayCluster")
    browser = objects["Deployment", "owrl-browser-server"]["spec"]["template"]["metadata"]["labels"]
    port = objects["Service", "owrl-browser-server"]["spec"]["ports"][0]["port"]

    # eval: the submitter reaches the selected cluster's dashboard
    shared_head = ray_pod_labels(cluster["spec"]["headGroupSpec"]["template"], cluster["metadata"]["name"], "head")
    submitter = jobs["eval"]["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    assert reaches(policies, submitter, shared_head, 8265)

    # train: KubeRay names the job's cluster <job>-<random>; its submitter reaches the head's
    # dashboard, its workers reach their head (GCS 6379, and Ray's other ports) and the browsers
    name = jobs["train"]["metadata"]["name"] + "-x7k2p"
    spec = jobs["train"]["spec"]["rayClusterSpec"]
    head = ray_pod_labels(spec["headGroupSpec"]["template"], name, "head")
    worker = ray_pod_labels(spec["workerGroupSpecs"][0]["template"], name, "worker")
    submitter = jobs["train"]["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    assert reaches(policies, submitter, head, 8265)
    for a, b in ((worker, head), (head, worker), (worker, worker)):
        assert reaches(policies, a, b, 6379) and reaches(policies, a, b, 10002)
    assert reaches(policies, worker, browser, port)
    # and its pods are held to the same egress as the other clients: not to an unlisted pod
    assert not reaches(policies, worker, {"app.kubernetes.io/name": "something-else"}, 443)
    assert not reaches(policies, head, {"app.kubernetes.io/name": "something-else"}, 443)


def test_rayjob_schema_rejects_broken_jobs():
    jsonschema.Draft202012Validator.check_schema(RAYJOB_SCHEMA)
    jobs = rayjobs(render(JOBS))
    ev, tr = jobs["eval"], jobs["train"]
    assert not problems(ev) and not problems(tr)

    def broken(job: dict[str, Any], change) -> list[str]:
        copy = json.loads(json.dumps(job))
        change(copy["spec"])
        return problems(copy)

    def misspell(spec):
        spec["shutdownAfterJobFinish"] = spec.pop("shutdownAfterJobFinishes")

    assert any("shutdownAfterJobFinish" in p for p in broken(ev, misspell))
    assert broken(tr, lambda spec: spec.update(entryPoint=spec.pop("entrypoint")))
    assert any("submissionMode" in p for p in broken(ev, lambda spec: spec.update(submissionMode="K8sJob")))
    assert any("activeDeadlineSeconds" in p for p in broken(ev, lambda spec: spec.update(activeDeadlineSeconds="6h")))
    assert broken(ev, lambda spec: spec.update(activeDeadlineSeconds=0))
    assert broken(ev, lambda spec: spec.update(backoffLimit=2))  # refused with clusterSelector
    assert broken(ev, lambda spec: spec.update(clusterSelector={"app": "owrl-rollouts"}))  # not by ray.io/cluster
    assert broken(ev, lambda spec: spec.pop("clusterSelector"))  # neither a cluster nor a selector
    assert broken(tr, lambda spec: spec.update(shutdownAfterJobFinishes=False))  # a TTL without shutdown
    assert broken(tr, lambda spec: spec.update(runtimeEnvYAML={"env_vars": {}}))  # a YAML string, not a mapping
    # the submitter's pod is held to Kubernetes' PodTemplateSpec
    assert any("submitterPodTemplate.spec.restartPolicys: unknown field" in p
               for p in broken(ev, lambda spec: spec["submitterPodTemplate"]["spec"].update(restartPolicys="Never")))
    assert any("submitterPodTemplate" in p and "name" in p
               for p in broken(ev, lambda spec: spec["submitterPodTemplate"]["spec"]["containers"][0].pop("name")))
    # the job's own cluster is held to the RayCluster schema and its pods to Kubernetes'
    assert any("num-cpus" in p for p in broken(tr, lambda spec: spec["rayClusterSpec"]["headGroupSpec"][
        "rayStartParams"].update({"num-cpus": 0})))
    assert any("resources.limit: unknown field" in p for p in broken(tr, lambda spec: containers(
        spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"])["ray-worker"]["resources"].update(limit={})))
    long_name = json.loads(json.dumps(tr))
    long_name["metadata"]["name"] = "owrl-train-" + "x" * 40  # its cluster's name would pass 53 characters
    assert any("metadata.name" in p for p in problems(long_name))


def test_rayjob_values_are_checked(tmp_path):
    def error(values: dict[str, Any]) -> str:
        with pytest.raises(render_mod.ValuesError) as caught:
            render(values)
        return str(caught.value)

    on = JOBS["rayJobs"]
    assert "rayJobs.eval.suite" in error({"rayJobs": {"eval": {"enabled": True}}})
    assert "absolute" in error({"rayJobs": {**on, "eval": {**on["eval"], "out": "eval/here"}}})
    assert "--ray-address" in error({"rayJobs": {**on, "train": {"enabled": True, "extraArgs": ["--ray-address", "auto"]}}})
    # Ray refuses a job whose runtime_env sets a variable the driver's ray.init sets too
    assert "OWRL_ALLOWED_DOMAINS" in error({"rayJobs": {**on, "runtimeEnv": {"env_vars": {"OWRL_ALLOWED_DOMAINS": "x"}}}})
    assert "SidecarMode" in error({"rayJobs": {**on, "submissionMode": "SidecarMode"}})
    # more Ray workers than CPUs: the run would wait forever for the rest
    assert "9 Ray workers" in error({"rayJobs": {**on, "eval": {**on["eval"], "workers": 9}}})
    assert render({"rayJobs": {**on, "eval": {**on["eval"], "workers": 9}}, "ray": {"workers": {"replicas": 3}}})
    too_many = tmp_path / "many.toml"
    too_many.write_text((ROOT / "examples" / "rl-ray.toml").read_text().replace("workers = 8", "workers = 32"))
    assert "32 Ray workers" in error({"rayJobs": {**on, "train": {"enabled": True, "workers": {"replicas": 7}}},
                                      "trainer": {"configFile": str(too_many)}})
    # the trainer Job's workers join the RayCluster: 32 of them on its 2 pods of 4 CPUs would never all start
    assert "32 Ray workers" in error({"trainer": {"configFile": str(too_many)}})
    assert render({"trainer": {"configFile": str(too_many)}, "ray": {"workers": {"replicas": 8}}})
    config = tmp_path / "rl.toml"
    config.write_text((ROOT / "examples" / "rl-ray.toml").read_text() + 'ray_address = "ray://elsewhere:10001"\n')
    assert "ray_address" in error({"rayJobs": on, "trainer": {"configFile": str(config)}})
    assert render({"trainer": {"configFile": str(config)}})  # the trainer Job, through Ray Client, may name it

