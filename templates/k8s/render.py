"""Render owrl's Kubernetes manifests from values: no Helm, only PyYAML.

    python templates/k8s/render.py                               # defaults, to stdout
    python templates/k8s/render.py -f my-values.yaml -o rendered/
    python templates/k8s/render.py --set browser.replicas=8 --set browser.limits.memory=16Gi | kubectl apply -f -

Values: ``values.yaml`` next to this file, then each ``-f FILE`` (deep-merged, later wins),
then each ``--set DOTTED.KEY=VALUE`` (VALUE read as YAML: ``8`` is a number, ``[a, b]`` a list).

Manifests: every ``manifests/*.yaml``, loaded as YAML, then every string ``${dotted.key}``
replaced. A string that is only a placeholder takes the value with its type (a number, a
list, a mapping), or its text when written ``${key!s}`` (a port in a command line); a
placeholder inside a longer string is replaced by its text. A placeholder
that resolves to nothing (None) removes its key. ``computed.*`` values are derived here from
the others (environment variables, the trainer's config, network peers). Afterwards:

- resource quantities are written as strings (``cpu: 4`` becomes ``"4"``);
- a NetworkPolicy rule whose peers came out empty is removed: in Kubernetes a rule with no
  peers allows every address, the opposite of an empty allow-list.

A document with a top-level ``x-render-if: ${key}`` is rendered only when that value is true
(the key itself is removed): the RayJobs are rendered on request, and the trainer Job is left
out when the training runs as a RayJob (the two would train the same run twice).

A key that the values do not have is an error naming it, as is an unknown ``--set`` key.
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

try:
    import tomllib
except ImportError:  # Python 3.10: the trainer config's checks are skipped
    tomllib = None  # type: ignore[assignment]

HERE = Path(__file__).resolve().parent
MANIFESTS = HERE / "manifests"
DEFAULTS = HERE / "values.yaml"

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.]+)(!s)?\}")
_DROP = object()
RENDER_IF = "x-render-if"

#: Where 30-trainer.yaml's ConfigMap and volume are mounted (the trainer Job and the training RayJob's head).
TRAIN_CONFIG = "/etc/owrl/rl.toml"
TRAIN_WORKDIR = "/data"


class ValuesError(ValueError):
    """A values file or --set that does not fit, or a placeholder with no value."""


# ============================================================================ values


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` deep-merged into a copy of ``base`` (mappings merge, anything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _open(name: str) -> bool:
    """A mapping whose keys are the user's to choose: resource amounts (any resource name, e.g.
    ``ephemeral-storage``) and the DNS pods' labels."""
    return name.rsplit(".", 1)[-1] in ("requests", "limits") or name == "network.dnsPodLabels"


def set_value(values: dict[str, Any], assignment: str) -> None:
    """Apply one ``dotted.key=YAML`` to ``values``; the key must exist in the defaults, except
    inside an open mapping (:func:`_open`)."""
    key, sep, text = assignment.partition("=")
    if not sep or not key:
        raise ValuesError(f"--set {assignment!r}: write KEY=VALUE, e.g. browser.replicas=8")
    *parents, last = key.split(".")
    node = values
    for i, part in enumerate(parents):
        if not isinstance(node.get(part), dict):
            raise ValuesError(f"--set {key}: no values key '{'.'.join(parents[:i + 1])}'")
        node = node[part]
    if last not in node and not _open(".".join(parents)):
        raise ValuesError(f"--set {key}: no values key '{key}'")
    node[last] = yaml.safe_load(text) if text.strip() else ""


def load_values(files: Iterable[Path] = (), sets: Iterable[str] = ()) -> dict[str, Any]:
    values = yaml.safe_load(DEFAULTS.read_text(encoding="utf-8"))
    for path in files:
        given = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(given, dict):
            raise ValuesError(f"{path}: a values file is a mapping of keys to values")
        _check_known(given, values, str(path))
        values = merge(values, given)
    for assignment in sets:
        set_value(values, assignment)
    return values


def _check_known(given: dict[str, Any], defaults: dict[str, Any], where: str, prefix: str = "") -> None:
    for key, value in given.items():
        name = f"{prefix}{key}"
        if key not in defaults:
            raise ValuesError(f"{where}: unknown key '{name}'")
        if isinstance(value, dict) and isinstance(defaults[key], dict) and defaults[key] and not _open(name):
            _check_known(value, defaults[key], where, name + ".")


# ============================================================================ computed values


def computed(values: dict[str, Any], base: Path) -> dict[str, Any]:
    """Values derived from the others, under ``computed.*``."""
    ns = values["namespace"]
    net = values["network"]
    browser_url = f"ws://owrl-browser-server.{ns}.svc.cluster.local:{values['browser']['port']}/"
    client_env = [{"name": "OWRL_BROWSER_ENDPOINT", "value": browser_url}]
    if net["allowedDomains"]:
        client_env.append({"name": "OWRL_ALLOWED_DOMAINS", "value": ",".join(net["allowedDomains"])})
    ray_address = f"ray://{values['ray']['clusterName']}-head-svc.{ns}.svc.cluster.local:10001"
    trainer = values["trainer"]
    config = Path(trainer["configFile"])
    if not config.is_absolute():
        config = base / config
    if not config.is_file():
        raise ValuesError(f"trainer.configFile: no such file: {config}")
    limits = {k: str(v) for k, v in trainer["limits"].items()}
    if int(trainer["gpus"] or 0) > 0:
        limits["nvidia.com/gpu"] = str(int(trainer["gpus"]))
    config_text = config.read_text(encoding="utf-8")
    return {
        "browserEndpoint": browser_url,
        "rayAddress": ray_address,
        "clientEnv": client_env,
        "trainerEnv": [*client_env, {"name": "RAY_ADDRESS", "value": ray_address}],
        "trainerConfig": config_text,
        **ray_jobs(values, config_text),
        "trainerLimits": limits,
        "storageClass": trainer["storageClass"] or None,
        "dnsPeers": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": net["dnsNamespace"]}},
                      "podSelector": {"matchLabels": dict(net["dnsPodLabels"])}}],
        "sitePeers": [{"ipBlock": {"cidr": cidr}} for cidr in net["allowedCIDRs"]],
        "sitePorts": [{"port": int(port), "protocol": "TCP"} for port in net["sitePorts"]],
        "workerPeers": [{"ipBlock": {"cidr": cidr}} for cidr in net["workerEgressCIDRs"]],
    }


def _cpus(quantity: Any) -> int:
    """The CPUs Ray sees in a pod: KubeRay passes the CPU limit (else the request), rounded up."""
    text = str(quantity).strip()
    return math.ceil(int(text[:-1]) / 1000) if text.endswith("m") else math.ceil(float(text))


def _group_cpus(group: dict[str, Any]) -> Optional[int]:
    """CPUs of a worker group at its ``replicas`` (None: no CPU figure given, Ray counts the node's)."""
    cpu = (group.get("limits") or {}).get("cpu") or (group.get("requests") or {}).get("cpu")
    return None if cpu is None else int(group["replicas"]) * _cpus(cpu)


def _check_actors(actors: int, group: dict[str, Any], key: str, where: str) -> None:
    """Each Ray worker is an actor holding one CPU until the run ends: actors beyond the group's
    CPUs would wait for a CPU forever, and the run with them (it starts once all have started)."""
    cpus = _group_cpus(group)
    if cpus is not None and actors > cpus:
        raise ValuesError(f"{key}: {actors} Ray workers of one CPU each, but {where} has {cpus} CPUs "
                          f"(replicas x CPUs per pod): raise its replicas or lower the workers")


def entrypoint(argv: list[str], workdir: Optional[str] = None) -> str:
    """A RayJob entrypoint that means ``argv`` however it is submitted: every word shell-quoted,
    no shell operator outside quotes. In K8sJobMode the submitter's bash reads the entrypoint as
    part of ``ray job submit ... -- ENTRYPOINT``, so a bare ``&&`` would run the rest in the
    submitter pod; a working folder therefore goes inside one quoted ``sh -c`` script."""
    command = shlex.join(argv)
    if workdir:
        return shlex.join(["sh", "-c", f"cd {shlex.quote(workdir)} && exec {command}"])
    return command


def _extra_args(args: Any, key: str) -> list[str]:
    if not isinstance(args, list):
        raise ValuesError(f"{key}: a list of arguments, e.g. [--tasks, a,b]")
    words = [str(a) for a in args]
    if any(w == "--ray-address" or w.startswith("--ray-address=") for w in words):
        raise ValuesError(f"{key}: no --ray-address: the job's driver joins the cluster it runs on "
                          f"(Ray's job supervisor sets RAY_ADDRESS)")
    return words


def ray_jobs(values: dict[str, Any], trainer_config: str) -> dict[str, Any]:
    """The RayJobs' derived values (40-rayjob-eval.yaml, 41-rayjob-train.yaml), checked only
    for the jobs that are enabled."""
    jobs = values["rayJobs"]
    ev, tr = jobs["eval"], jobs["train"]
    out: dict[str, Any] = {"trainerJob": not tr["enabled"], "evalEntrypoint": None, "trainEntrypoint": None,
                           "runtimeEnvYAML": None}
    config: dict[str, Any] = {}  # the run's config, read where it can be (tomllib: Python 3.11+)
    if tomllib is not None:
        try:
            config = tomllib.loads(trainer_config)
        except tomllib.TOMLDecodeError as err:
            raise ValuesError(f"trainer.configFile: not TOML: {err}") from None
    if not tr["enabled"] and "workers" in config:  # the trainer Job, whose workers join the RayCluster
        _check_actors(int(config["workers"]), values["ray"]["workers"], "trainer.configFile's workers",
                      f"the rollout group of RayCluster {values['ray']['clusterName']}")
    if not (ev["enabled"] or tr["enabled"]):
        return out
    if jobs["submissionMode"] not in ("K8sJobMode", "HTTPMode"):
        raise ValuesError(f"rayJobs.submissionMode: K8sJobMode or HTTPMode, not {jobs['submissionMode']!r} "
                          f"(SidecarMode cannot target an existing cluster; InteractiveMode submits nothing)")
    runtime_env = jobs["runtimeEnv"] or {}
    if not isinstance(runtime_env, dict):
        raise ValuesError("rayJobs.runtimeEnv: a mapping (Ray's runtime_env), e.g. {env_vars: {HF_HUB_OFFLINE: '1'}}")
    owrl_vars = sorted(k for k in (runtime_env.get("env_vars") or {}) if str(k).startswith("OWRL_"))
    if owrl_vars:
        # the driver passes its OWRL_* variables to its workers in ray.init's runtime_env, and Ray
        # refuses a job whose runtime_env sets the same variable (Failed to merge the Job's runtime env)
        raise ValuesError(f"rayJobs.runtimeEnv.env_vars: {', '.join(owrl_vars)}: set OWRL_* variables in the "
                          f"pods' env, not the job's runtime_env (owrl's driver passes them on itself)")
    if runtime_env:
        out["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=False, default_flow_style=False)

    if ev["enabled"]:
        suite = str(ev["suite"] or "").strip()
        if not suite:
            raise ValuesError("rayJobs.eval.suite: name the suite to evaluate (a suite name, or the absolute "
                              "path of a task file in the image)")
        policy = str(ev["policy"] or "")
        result = str(ev["out"] or f"/tmp/owrl-eval/{Path(suite).stem}-{policy or 'default'}")
        if not result.startswith("/"):
            raise ValuesError(f"rayJobs.eval.out: an absolute path, not {result!r}: the driver's working "
                              f"folder on the head is Ray's")
        argv = ["owrl", "eval", "--suite", suite]
        if policy:
            argv += ["--policy", policy]
        if ev["model"]:
            argv += ["--model", str(ev["model"])]
        argv += ["--judge", str(ev["judge"]), "--episodes", str(int(ev["episodes"])),
                 "--backend", "ray", "--workers", str(int(ev["workers"])), "--contexts", str(int(ev["contexts"])),
                 "--out", result]
        if ev["failUnder"] is not None:
            argv += ["--fail-under", str(float(ev["failUnder"]))]
        argv += _extra_args(ev["extraArgs"], "rayJobs.eval.extraArgs")
        _check_actors(int(ev["workers"]), values["ray"]["workers"], "rayJobs.eval.workers",
                      f"the rollout group of RayCluster {values['ray']['clusterName']}")
        out["evalEntrypoint"] = entrypoint(argv)

    if tr["enabled"]:
        argv = ["owrl", "train", "rl", "--config", TRAIN_CONFIG, "--backend", "ray",
                *_extra_args(tr["extraArgs"], "rayJobs.train.extraArgs")]
        out["trainEntrypoint"] = entrypoint(argv, workdir=TRAIN_WORKDIR)
        if config.get("ray_address"):
            raise ValuesError(f"trainer.configFile sets ray_address = {config['ray_address']!r}: as a RayJob "
                              f"the trainer joins its own cluster through RAY_ADDRESS; remove it")
        if "workers" in config:
            _check_actors(int(config["workers"]), tr["workers"], "trainer.configFile's workers",
                          "rayJobs.train.workers")
    return out


# ============================================================================ rendering


def lookup(values: dict[str, Any], key: str) -> Any:
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValuesError(f"placeholder ${{{key}}}: no such value")
        node = node[part]
    return node


def substitute(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            new = substitute(value, values)
            if new is not _DROP:
                out[key] = new
        return out
    if isinstance(node, list):
        return [item for item in (substitute(i, values) for i in node) if item is not _DROP]
    if isinstance(node, str):
        whole = _PLACEHOLDER.fullmatch(node)
        if whole:
            value = copy.deepcopy(lookup(values, whole.group(1)))
            if value is None:
                return _DROP
            return str(value) if whole.group(2) else value
        return _PLACEHOLDER.sub(lambda m: str(lookup(values, m.group(1))), node)
    return node


def _quantities_as_strings(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("requests", "limits") and isinstance(value, dict):
                for name, amount in value.items():
                    if isinstance(amount, (int, float)) and not isinstance(amount, bool):
                        value[name] = str(amount)
            _quantities_as_strings(value)
    elif isinstance(node, list):
        for item in node:
            _quantities_as_strings(item)


def _drop_open_rules(obj: dict[str, Any]) -> None:
    spec = obj.get("spec", {})
    for direction, peers in (("egress", "to"), ("ingress", "from")):
        rules = spec.get(direction)
        if isinstance(rules, list):
            spec[direction] = [r for r in rules if not (isinstance(r.get(peers), list) and not r[peers])]


def render(values: dict[str, Any], base: Optional[Path] = None) -> list[dict[str, Any]]:
    """Every manifest rendered with ``values``, in file order. ``base``: where relative paths start."""
    values = dict(values, computed=computed(values, base or Path.cwd()))
    objects: list[dict[str, Any]] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc:
                continue
            if RENDER_IF in doc:
                doc = dict(doc)
                when = substitute(doc.pop(RENDER_IF), values)
                if not isinstance(when, bool):
                    raise ValuesError(f"{path.name}: {RENDER_IF} must come out true or false, not {when!r}")
                if not when:
                    continue
            obj = substitute(doc, values)
            _quantities_as_strings(obj)
            if obj.get("kind") == "NetworkPolicy":
                _drop_open_rules(obj)
            objects.append(obj)
    return objects


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the trainer's config) as literal blocks, as they were written."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text and not any(line != line.rstrip() for line in text.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def file_name(index: int, obj: dict[str, Any]) -> str:
    """``NN-kind-name.yaml``: ``kubectl apply -f DIR`` takes files in name order, the namespace first."""
    return f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Render owrl's Kubernetes manifests from values.")
    parser.add_argument("-f", "--values", action="append", default=[], type=Path, help="a values file (repeatable)")
    parser.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                        help="one value, e.g. browser.replicas=8 (repeatable)")
    parser.add_argument("-o", "--out", type=Path, help="write one file per object here (default: all to stdout)")
    args = parser.parse_args(argv)
    try:
        objects = render(load_values(args.values, args.sets))
    except ValuesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out is None:
        sys.stdout.write(to_yaml(objects))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for index, obj in enumerate(objects):
        (args.out / file_name(index, obj)).write_text(to_yaml([obj]), encoding="utf-8")
    print(f"wrote {len(objects)} manifests to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
