"""``owrl serve``'s refusals and its light footprint, through the real command."""

from __future__ import annotations

import subprocess
import sys

from owrl_cli import owrl


def test_it_refuses_to_start_without_a_token():
    result = owrl("serve", "--port", "1", timeout=60)
    assert result.returncode == 2
    assert "OWRL_SERVE_TOKEN" in result.stderr and "--no-auth" in result.stderr


def test_no_auth_is_refused_on_any_address_but_127_0_0_1():
    for host in ("0.0.0.0", "localhost", "::"):
        result = owrl("serve", "--no-auth", "--host", host, "--port", "1", timeout=60)
        assert result.returncode == 2, result.stderr
        assert "--no-auth" in result.stderr and "127.0.0.1" in result.stderr


def test_a_bad_plugin_option_stops_the_server_before_it_serves(tmp_path):
    """configuration.md: the commands check every [plugins.NAME] table before anything starts;
    a served job would otherwise fail on it, one after another."""
    (tmp_path / "owrl.toml").write_text('[plugins.openwebrl]\ntemperature = "hot"\n')
    result = owrl("serve", "--port", "1", "--data-dir", str(tmp_path / "data"), cwd=tmp_path,
                  env={"OWRL_SERVE_TOKEN": "a-long-enough-token"}, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "temperature" in result.stderr and "[plugins.openwebrl]" in result.stderr, result.stderr
    assert not (tmp_path / "data").exists()  # refused before the data dir was made


def test_a_missing_fastapi_names_the_extra_to_install(tmp_path):
    # the import machinery is made to fail for fastapi, as on a machine without it
    code = ("import sys; sys.modules['fastapi'] = None\n"
            "from owrl_sdk.cli import main\n"
            f"main(['serve', '--no-auth', '--data-dir', {str(tmp_path / 'data')!r}])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "pip install 'openwebrl-sdk[serve]'" in result.stderr
    assert not (tmp_path / "data").exists()


def test_owrl_help_lists_serve_without_importing_fastapi_or_uvicorn():
    code = ("import sys\nfrom owrl_sdk.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "serve " in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_no_auth_on_loopback_serves_without_a_token(serve):
    server = serve("--no-auth", token=None)
    assert server.request("GET", "/v1/jobs", token=None).status == 200
    assert "securitySchemes" not in server.request("GET", "/openapi.json", token=None).json().get("components", {})


def test_it_warns_about_secrets_that_any_page_could_have_typed_into_it(serve, tmp_path):
    loose = serve(data_dir=tmp_path / "a", env={"OWRL_SECRET_SHOP_PW": "pw-123456", "OWRL_SECRET_API": "tok-123456",
                                                "OWRL_SECRETS_ALLOWED_ON": "API=api.test"})
    assert "warning: secrets SHOP_PW may be typed on any page a job opens" in loose.log.read_text()
    bound = serve(data_dir=tmp_path / "b", env={"OWRL_SECRET_SHOP_PW": "pw-123456",
                                                "OWRL_SECRETS_ALLOWED_ON": "SHOP_PW=shop.test"})
    fenced = serve(data_dir=tmp_path / "c", env={"OWRL_SECRET_SHOP_PW": "pw-123456", "OWRL_ALLOWED_DOMAINS": "shop.test"})
    assert "warning" not in bound.log.read_text() and "warning" not in fenced.log.read_text()
