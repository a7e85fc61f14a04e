"""A credential in the endpoint's URL is never recorded: not in a run's log, a copy or an export.

``ANTHROPIC_BASE_URL=http://user:password@host/`` (a proxy with basic authentication) is used
as a user would: ``nb-durable run`` against the loopback Messages API (which, like the real
API, refuses the basic credentials the SDK then sends: the run fails, and its log is written
all the same), ``nb-durable run --batch`` (runs queued before any request), ``copy`` to a
SQLite store and ``export``. Then every file written is searched for the user and the
password. The rule itself (``public_url``) is checked on credential-looking query parameters.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.base import endpoint_of, public_url
from nb_durable.core.runs import read_summary
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply

USER = "proxyuser7c1"
PASSWORD = "pr0xy-passw0rd-93b1d4"


def cli(*args: str, cwd: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        cwd=cwd,
        env=subprocess_env(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="test-key"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def containing(root: Path, *texts: str) -> list[str]:
    return [f"{p.relative_to(root)}: {t}" for p in sorted(root.rglob("*")) if p.is_file() for t in texts if t.encode() in p.read_bytes()]


def test_a_password_in_anthropic_base_url_is_in_no_log_copy_or_export(tmp_path: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([reply("Done.")])) as server:
        base_url = server.url.replace("http://", f"http://{USER}:{PASSWORD}@") + "/"
        ran = cli("run", "Say done.", "--run", "r1", "--model", "claude-test-1", "--workspace", ".", cwd=tmp_path, base_url=base_url)
        assert server.requests, "the run never reached the server: it proves nothing"
        assert ran.returncode == 1 and "401" in ran.stderr, ran.stderr
        batch = tmp_path / "batch.jsonl"
        batch.write_text(json.dumps({"task": "Queued one.", "run": "q1"}) + "\n")
        queued = cli("run", "--batch", str(batch), "--model", "claude-test-1", "--workspace", ".", cwd=tmp_path, base_url=base_url)
        assert queued.returncode == 0, queued.stderr
        copied = cli("copy", "runs", "sqlite:///copy.db", cwd=tmp_path, base_url=base_url)
        assert copied.returncode == 0, copied.stderr
        exported = cli("export", "r1", "-o", "r1.ipynb", cwd=tmp_path, base_url=base_url)
        assert exported.returncode == 0, exported.stderr
    recorded = read_summary("r1", str(tmp_path / "runs")).settings["endpoint"]
    assert recorded == {"url": server.url, "credential": "api_key"}, "the endpoint is recorded, without its userinfo"
    assert read_summary("q1", str(tmp_path / "runs")).settings["endpoint"]["url"] == server.url
    assert (tmp_path / "copy.db").exists() and (tmp_path / "r1.ipynb").exists()
    assert containing(tmp_path, PASSWORD, USER) == []
    for output in (ran, queued, copied, exported):
        assert PASSWORD not in output.stdout + output.stderr


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("https://u:p@proxy.example/v1", "https://proxy.example/v1"),
        ("https://token-only@proxy.example", "https://proxy.example"),
        ("http://proxy.example:8080/a?region=eu&api_key=K1&Signature=S2&X-Amz-Credential=C3&sig=4&auth=5&access_token=6&apikey=7&Password=8&token=9&secret=10&key=11",
         "http://proxy.example:8080/a?region=eu&api_key=***&Signature=***&X-Amz-Credential=***&sig=***&auth=***&access_token=***&apikey=***&Password=***&token=***&secret=***&key=***"),
        ("https://api.anthropic.com", "https://api.anthropic.com"),
        ("not a url", "not a url"),
    ],
)
def test_public_url_drops_the_userinfo_and_masks_credential_looking_parameters(url: str, public: str) -> None:
    assert public_url(url) == public


def test_every_model_s_endpoint_is_recorded_through_the_rule_and_the_repr_hides_it_too() -> None:
    class Custom:
        name = "custom"

        def endpoint(self) -> dict[str, str]:
            return {"url": "https://me:hunter2hunter2@gateway.example/v1?token=abc123", "credential": "api_key"}

    assert endpoint_of(Custom()) == {"url": "https://gateway.example/v1?token=***", "credential": "api_key"}
    model = AnthropicModel(api_key="k", base_url=f"http://{USER}:{PASSWORD}@127.0.0.1:9/")
    assert PASSWORD not in repr(model) and USER not in repr(model)
