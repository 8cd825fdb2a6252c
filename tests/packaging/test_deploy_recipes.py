"""The deployment recipes of ``deploy/`` as they ship: the systemd units pass ``systemd-analyze
verify``, every command they, the container image and the compose file run is a real command
line of the CLI, the stop timeouts cover what the commands wait for on SIGTERM, and the example
production configuration loads with the product's own loader and holds no secret."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from urllib.parse import urlsplit

import pytest

from fme_ai_resilience.cli import build_parser
from fme_ai_resilience.core.config.settings import ENV_PREFIX, SECRET_SETTINGS, Settings
from fme_ai_resilience.core.resilience.retry import RetryPolicy
from fme_ai_resilience.core.resilience.task_budget import worst_case_task_s
from fme_ai_resilience.core.text.redact import REDACTED

from helpers.deploy_recipes import (COMMAND, CONFIG, CONTAINER, INSTALLED, SERVICES, SYSTEMD,
                                    commands, env_file, one, unit, unit_path, values)

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (systemd's own checker of "
                                    "unit files)")
USER = "fme-ai-resilience"
#: What a placeholder secret is, by the shape its setting needs.
PLACEHOLDERS = {"FAIR_DOWNLOAD_HOST_HEADERS":
                '{"photos.example.com": {"Authorization": "Bearer placeholder"}}'}


def _secret_env_names():
    return {ENV_PREFIX + name.replace(".", "_").upper() for name in SECRET_SETTINGS}


def _production_with_placeholder_secrets():
    env = env_file(CONFIG / "production.env")
    for name, value in env_file(CONFIG / "secrets.env.example").items():
        env[name] = PLACEHOLDERS.get(name, "placeholder-secret-value")
    return env


def _verify(directory):
    """``systemd-analyze verify`` on every unit in ``directory`` (its drop-ins included):
    the exit code and everything it printed."""
    units = sorted(str(p) for p in directory.iterdir() if p.suffix in (".service", ".target"))
    env = dict(os.environ, SYSTEMD_UNIT_PATH=f"{directory}:", SYSTEMD_LOG_LEVEL="info")
    done = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", *units], env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).strip()


def _units_here(tmp_path, edit=lambda name, text: text):
    """The shipped units in ``tmp_path`` running this environment's command (the one they name
    is not installed here), with the PostgreSQL-password drop-in for every service."""
    for path in sorted(SYSTEMD.glob("*.service")) + sorted(SYSTEMD.glob("*.target")):
        text = path.read_text(encoding="utf-8").replace(INSTALLED, COMMAND)
        (tmp_path / path.name).write_text(edit(path.name, text), encoding="utf-8")
    for name in SERVICES:
        drop_in = tmp_path / f"fme-ai-resilience-{name}.service.d"
        drop_in.mkdir()
        shutil.copy(SYSTEMD / "pgpass-credential.conf", drop_in / "pgpass.conf")
    return tmp_path


@needs_systemd_analyze
def test_the_units_pass_systemd_analyze_verify(tmp_path):
    """systemd itself loads every unit and drop-in without an error or a warning (an unknown
    key, a bad value, a command that is not executable)."""
    code, printed = _verify(_units_here(tmp_path))
    assert (code, printed) == (0, "")


@needs_systemd_analyze
@pytest.mark.parametrize("mistake", ["ProtectSystem=strict\n", "ExecStart=" + COMMAND])
def test_the_verification_sees_a_broken_unit(tmp_path, mistake):
    """The check above can fail: a misspelt key, or a command that does not exist, is reported."""
    def edit(name, text):
        if name != unit_path("serve").name:
            return text
        broken = mistake.replace("ProtectSystem", "ProtectSistem").replace(
            COMMAND, "/nonexistent/fme-ai-resilience")
        assert mistake in text
        return text.replace(mistake, broken, 1)
    code, printed = _verify(_units_here(tmp_path, edit))
    assert printed and ("ProtectSistem" in printed or "/nonexistent" in printed)


@pytest.mark.parametrize("name", SERVICES)
def test_every_unit_command_is_a_real_command_line(name):
    """Each ExecStartPre/ExecStart parses with the CLI's own parser (an unknown option or a bad
    value exits 2 here), upgrades the ledger first and runs the command the unit is named for,
    as a loop where it is one."""
    lines = commands(unit_path(name))
    assert lines[0] == ["db", "upgrade"]
    parsed = [build_parser().parse_args(line) for line in lines]
    assert parsed[-1].command == name
    if name in ("process", "compensate"):
        assert parsed[-1].loop is True


@pytest.mark.parametrize("name", SERVICES)
def test_every_unit_runs_hardened_as_its_own_user_with_secrets_from_a_file(name):
    """The dedicated user, secrets only through EnvironmentFile= (never on the command line),
    a restart on failure but not on a configuration error, SIGTERM to stop, and the sandbox."""
    path = unit_path(name)
    service = dict(unit(path)["Service"])
    assert (service["User"], service["Group"]) == (USER, USER)
    assert values(path, "Service", "EnvironmentFile") == [
        "/etc/fme-ai-resilience/production.env", "/etc/fme-ai-resilience/secrets.env"]
    for key, value in {"Restart": "on-failure", "RestartPreventExitStatus": "2",
                       "KillSignal": "SIGTERM", "NoNewPrivileges": "yes",
                       "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                       "StateDirectory": USER, "CapabilityBoundingSet": "",
                       "UMask": "0077"}.items():
        assert service.get(key) == value, f"{path.name}: {key}={service.get(key)!r}"
    sysusers = (SYSTEMD / "fme-ai-resilience.sysusers.conf").read_text(encoding="utf-8")
    assert re.search(rf"^u {USER} - .* /var/lib/{USER} ", sysusers, re.M)
    assert f"fme-ai-resilience-{name}.service" in one(
        SYSTEMD / "fme-ai-resilience.target", "Unit", "Wants").split()


def test_no_secret_is_ever_on_a_command_line():
    """Every ``--*-env`` option of the units, the image and the compose file names a variable of
    the secrets file, and no option carries a value from it."""
    secrets = env_file(CONFIG / "secrets.env.example")
    lines = [line for name in SERVICES for line in commands(unit_path(name))]
    lines += [_dockerfile_cmd()] + [s["command"] for s in _compose()["services"].values()
                                    if s.get("image", "").startswith("fme-ai-resilience")]
    named = set()
    for line in lines:
        for option, value in zip(line, line[1:]):
            if option.endswith("-env"):
                named.add(value)
    assert named == {"INTAKE_SHARED_SECRET", "MONITOR_TOKEN"}
    assert named <= set(secrets)
    assert "FME_FLOW_TOKEN" in secrets   # serve's --flow-token-env default, for --flow-url


def test_the_stop_timeouts_cover_what_each_command_waits_for_on_sigterm():
    """serve answers its requests in flight within --shutdown-timeout-seconds; the processor
    claims nothing more and finishes the tasks in hand, each within its worst case under the
    example configuration, with a minute for its write-back: systemd (TimeoutStopSec) and
    compose (stop_grace_period) wait that long at least before SIGKILL."""
    serve = build_parser().parse_args(commands(unit_path("serve"))[-1])
    settings = Settings.from_env(_production_with_placeholder_secrets())
    task_s = worst_case_task_s(RetryPolicy.from_settings(settings), settings.timeouts) + 60
    need = {"serve": serve.shutdown_timeout_seconds + 5, "process": task_s, "compensate": 60}
    compose = _compose()["services"]
    for name, seconds in need.items():
        assert int(one(unit_path(name), "Service", "TimeoutStopSec")) >= seconds, name
        assert int(compose[name]["stop_grace_period"].rstrip("s")) >= seconds, name
    compose_serve = build_parser().parse_args(compose["serve"]["command"])
    assert compose_serve.shutdown_timeout_seconds == serve.shutdown_timeout_seconds


def test_the_production_configuration_loads_and_holds_no_secret():
    """production.env loads with the product's loader (Settings.from_env) once the secrets
    file's values are filled in; it names no secret setting and no secret variable, its ledger
    URL has no password, and the secrets template ships every value empty."""
    production = env_file(CONFIG / "production.env")
    secrets = env_file(CONFIG / "secrets.env.example")
    assert not set(production) & (_secret_env_names() | set(secrets))
    assert urlsplit(production["FAIR_DB_URL"]).password is None
    assert all(value == "" for value in secrets.values()), "a secret value in the template"
    assert set(secrets) - {"PGPASSWORD", "INTAKE_SHARED_SECRET", "MONITOR_TOKEN",
                           "FME_FLOW_TOKEN"} <= _secret_env_names()
    settings = Settings.from_env(_production_with_placeholder_secrets())
    shown = settings.as_flat_dict()
    for name in SECRET_SETTINGS:
        env_name = ENV_PREFIX + name.replace(".", "_").upper()
        if env_name in secrets:
            assert shown[name] == REDACTED, name
    assert settings.vision.endpoint == production["FAIR_VISION_ENDPOINT"]
    assert settings.arcgis.client_id == production["FAIR_ARCGIS_CLIENT_ID"]


def test_the_production_configuration_names_real_settings_only():
    """A misspelt FAIR_* name in the example is refused by the loader, so every name in it is a
    setting (or, for FAIR_DB_URL and FAIR_LOG_FORMAT, a variable the commands read)."""
    production = env_file(CONFIG / "production.env")
    typo = dict(_production_with_placeholder_secrets(), FAIR_VISION_ENDPOIN="x")
    with pytest.raises(Exception, match="FAIR_VISION_ENDPOIN"):
        Settings.from_env(typo)
    known = {ENV_PREFIX + n.replace(".", "_").upper() for n in Settings().as_flat_dict()}
    assert set(production) - known == {"FAIR_DB_URL", "FAIR_LOG_FORMAT"}


# -- the container --------------------------------------------------------------------------

def _dockerfile():
    text = (CONTAINER / "Dockerfile").read_text(encoding="utf-8")
    return re.sub(r"\\\n\s*", " ", text)


def _instruction(name):
    return [line.split(None, 1)[1] for line in _dockerfile().splitlines()
            if line.split(None, 1)[:1] == [name]]


def _dockerfile_cmd():
    return json.loads(_instruction("CMD")[0])


def _compose():
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the compose file")
    return yaml.safe_load((CONTAINER / "compose.yaml").read_text(encoding="utf-8"))


def test_the_image_runs_serve_as_a_user_with_a_health_check():
    """python:3.11-slim, the package with its PostgreSQL extra, a non-root user, serve by
    default (a real command line), a HEALTHCHECK on /healthz, and only sources that exist."""
    assert _instruction("FROM") == ["python:3.11-slim"]
    assert any('"/src[postgres]"' in run for run in _instruction("RUN"))
    assert _instruction("USER") == ["fair"]
    assert json.loads(_instruction("ENTRYPOINT")[0]) == ["fme-ai-resilience"]
    args = build_parser().parse_args(_dockerfile_cmd())
    assert (args.command, args.host, args.port) == ("serve", "0.0.0.0", 8080)
    assert "/healthz" in _instruction("HEALTHCHECK")[0]
    root = CONTAINER.parents[1]
    kept = (CONTAINER / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    for copy in _instruction("COPY"):
        *sources, _ = copy.split()
        assert all((root / s).exists() and f"!{s}" in kept for s in sources), copy


def test_the_compose_file_upgrades_the_ledger_before_the_services_start():
    """PostgreSQL 15, healthy before ``db upgrade`` runs once; serve, process --loop and
    compensate --loop start only after it succeeded; every command is a real command line."""
    services = _compose()["services"]
    assert services["db"]["image"] == "postgres:15"
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    for name in SERVICES:
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}}
        assert build_parser().parse_args(services[name]["command"]).command == name
    for name in ("migrate", *SERVICES):
        assert services[name]["env_file"] == ["../config/production.env", ".env"]
        assert urlsplit(services[name]["environment"]["FAIR_DB_URL"]).password is None
    assert "${PGPASSWORD:?" in services["db"]["environment"]["POSTGRES_PASSWORD"]


# -- Windows (WinSW) ------------------------------------------------------------------------

def _winsw(name):
    import xml.etree.ElementTree as ET
    return ET.parse(SYSTEMD.parent / "windows" / f"fme-ai-resilience-{name}.xml").getroot()


@pytest.mark.parametrize("name", SERVICES)
def test_the_windows_services_run_what_the_units_run(name):
    """Each WinSW file runs python.exe -m fme_ai_resilience with the unit's own command line,
    waits at least as long on stop, takes the example configuration's values and leaves every
    secret empty to be filled in, with each variable a --*-env option names among them."""
    root = _winsw(name)
    assert root.findtext("id") == f"fme-ai-resilience-{name}"
    assert root.findtext("executable").endswith("\\Scripts\\python.exe")
    argv = root.findtext("arguments").split()
    assert argv[:2] == ["-m", "fme_ai_resilience"]
    assert argv[2:] == [a for a in commands(unit_path(name))[-1] if a != "--log-format"
                        and a != "json"]
    build_parser().parse_args(argv[2:])
    seconds, unit_name = root.findtext("stoptimeout").split()
    assert unit_name == "sec"
    assert int(seconds) == int(one(unit_path(name), "Service", "TimeoutStopSec"))
    env = {e.get("name"): e.get("value") for e in root.findall("env")}
    production = env_file(CONFIG / "production.env")
    secrets = env_file(CONFIG / "secrets.env.example")
    for key, value in env.items():
        assert key in production or key in secrets, key
        assert value == production.get(key, ""), key
    named = {value for option, value in zip(argv, argv[1:]) if option.endswith("-env")}
    assert named <= {k for k in env if k in secrets}
    filled = dict(env, **{k: "placeholder-secret-value" for k in env if k in secrets})
    Settings.from_env(filled)
    assert root.find("serviceaccount/user").text != "LocalSystem"
