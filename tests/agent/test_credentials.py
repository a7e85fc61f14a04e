"""Credentials stay out of tools, logs and requests, as a user meets them (issue 14, items 10-11).

Proven here through the interfaces people use:

* ``nb-durable run`` (a subprocess, talking to the loopback Messages API): ``run_bash`` sees
  no credential variable (``env`` shows neither ``ANTHROPIC_API_KEY`` nor ``DB_PASSWD``);
  one passed through deliberately (``NB_DURABLE_PASS_ENV``) works, and what a command makes
  of it (``base64``, ``rev``, ``xxd -p``, ``fold``, URL-encoding) never reaches the log or the
  next request; a ``.env`` file holding a Stripe key that is in no variable, an API error
  body echoing an Anthropic key, a PEM private key, a GitHub token and an AWS key id are
  masked by their formats.
* ``run_agent(client=AnthropicModel(api_key=...))`` in a script: a tool that returns the key
  (it is in no environment variable) puts only ``[REDACTED:api_key]`` in the log and in what
  the model is sent.
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.parse
from pathlib import Path

from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

MODEL = "claude-test-1"
API_KEY = "sk-ant-api03-" + "Zq8v2LmN4pR7sT1uW3xY5zA6bC9dE0fG" * 3 + "-AA"
PASSED = "svc+token/8f3a91c2d4e5=b6a7"  # passed through on purpose, so commands can encode it
DB_PASSWD = "correct-horse-battery"
STRIPE = "sk_live_51HxYzAbCdEfGhIjKlMnOpQrStUv"
OTHER_ANTHROPIC = "sk-ant-api03-" + "k" * 90 + "AA"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY[::-1]}\n-----END RSA PRIVATE KEY-----\n"


def _forms(value: str) -> list[str]:
    """What a leak of ``value`` would look like in a log: itself and its encodings."""
    data = value.encode()
    return [
        value,
        value[::-1],
        base64.b64encode(data).decode()[:16],
        data.hex()[:16],
        urllib.parse.quote(value, safe="")[:16],
        value[:12],
    ]


COMMANDS = [
    "env",
    'echo "$SERVICE_TOKEN" | base64',
    'echo "$SERVICE_TOKEN" | rev',
    'printf %s "$SERVICE_TOKEN" | xxd -p',
    'echo "$SERVICE_TOKEN" | fold -w 7',
    "python3 -c 'import os, urllib.parse; print(urllib.parse.quote(os.environ[\"SERVICE_TOKEN\"] + \"/x\"))'",
    "cat .env",
    "cat error.json",
    "cat id_rsa",
    "cat notes.txt",
]


def test_tools_see_no_credentials_and_encodings_never_reach_the_log(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".env").write_text(f"STRIPE_SECRET={STRIPE}\nDEBUG=1\n")
    (work / "error.json").write_text(json.dumps({"type": "error", "error": {"message": f"invalid x-api-key: {OTHER_ANTHROPIC}"}}))
    (work / "id_rsa").write_text(PEM)
    (work / "notes.txt").write_text(f"token is {GITHUB} and key id {AWS_ID}\n")
    turns = [
        reply("Looking.", *(tool_use("run_bash", {"command": c}, id=f"toolu_{i}") for i, c in enumerate(COMMANDS))),
        reply("Done."),
    ]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        done = forkserver.run(
            [sys.executable, "-m", "nb_durable.cli", "run", "Look around.", "--run", "creds", "--model", MODEL, "--workspace", "work"],
            cwd=tmp_path,
            env=subprocess_env(
                ANTHROPIC_BASE_URL=server.url,
                ANTHROPIC_API_KEY=API_KEY,
                DB_PASSWD=DB_PASSWD,
                SERVICE_TOKEN=PASSED,
                NB_DURABLE_PASS_ENV="SERVICE_TOKEN",
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        results = {b["tool_use_id"]: b["content"] for b in server.requests[-1].messages[-1]["content"]}
        sent = json.dumps([r.body for r in server.requests])
    log = (tmp_path / "runs" / "creds.jsonl").read_text()
    # Each run_bash result ends with its exit status; the command's own output is what is judged.
    out = {c: results[f"toolu_{i}"].rsplit("[exit status", 1)[0] for i, c in enumerate(COMMANDS)}

    env_lines = out["env"].splitlines()
    assert not [line for line in env_lines if line.startswith(("ANTHROPIC_API_KEY=", "DB_PASSWD="))], out["env"]
    assert "SERVICE_TOKEN=[REDACTED:SERVICE_TOKEN]" in env_lines, out["env"]  # passed through, still masked
    assert "ANTHROPIC_BASE_URL=" + server.url in env_lines  # not a credential: kept
    assert out['echo "$SERVICE_TOKEN" | base64'].startswith("[REDACTED:SERVICE_TOKEN as base64]")
    assert out['echo "$SERVICE_TOKEN" | rev'].strip() == "[REDACTED:SERVICE_TOKEN as reversed]"
    assert out['printf %s "$SERVICE_TOKEN" | xxd -p'].strip() == "[REDACTED:SERVICE_TOKEN as hex]"
    assert out['echo "$SERVICE_TOKEN" | fold -w 7'].strip() == "[REDACTED:SERVICE_TOKEN]"
    assert "[REDACTED:SERVICE_TOKEN as url-encoded]" in out[COMMANDS[5]]
    assert out["cat .env"].strip() == "STRIPE_SECRET=[REDACTED:stripe-key]\nDEBUG=1"
    assert "invalid x-api-key: [REDACTED:anthropic-key]" in out["cat error.json"]
    assert out["cat id_rsa"].strip() == "[REDACTED:private-key]"
    assert "[REDACTED:github-token]" in out[COMMANDS[-1]] and "[REDACTED:aws-access-key-id]" in out[COMMANDS[-1]]

    for secret in (API_KEY, PASSED, DB_PASSWD, STRIPE, OTHER_ANTHROPIC, GITHUB, AWS_ID, PEM_BODY):
        for form in _forms(secret):
            assert form not in log, (secret, form)
            assert form not in sent, (secret, form)


SCRIPT = """
import sys
from nb_durable.agent import AnthropicModel, ToolRegistry, run_agent, tool

KEY = sys.argv[2]

@tool(effect="pure")
def debug_settings() -> str:
    \"\"\"Print the settings (a careless tool: it shows the key).\"\"\"
    return f"base_url={sys.argv[1]} api_key={KEY} flipped={KEY[::-1]}"

model = AnthropicModel(api_key=KEY, base_url=sys.argv[1], stream=False)
result = run_agent("Show the settings.", run_id="held", client=model, model="claude-test-1",
                   tools=ToolRegistry([debug_settings]), workspace=".")
print(result.status)
"""


def test_a_key_given_to_the_model_object_is_masked_in_tool_results(tmp_path: Path) -> None:
    bare = "api03-held-in-no-variable-" + "Q" * 20  # no known format: only the model's holding it masks it
    turns = [reply("Checking.", tool_use("debug_settings", {}, id="toolu_dbg")), reply("Done.")]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        done = forkserver.run(
            [sys.executable, "-c", SCRIPT, server.url, bare],
            cwd=tmp_path,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "completed"
        assert server.requests[0].headers.get("authorization") == f"Bearer {bare}"  # the model did use it
        answer = server.requests[-1].messages[-1]["content"][0]["content"]
        sent = json.dumps([r.body for r in server.requests])
    log = (tmp_path / "runs" / "held.jsonl").read_text()
    assert answer == f"base_url={server.url} api_key=[REDACTED:api_key] flipped=[REDACTED:api_key as reversed]"
    assert bare not in log and bare[::-1] not in log
    assert bare not in sent and bare[::-1] not in sent


README_AGENT = """
from nb_durable import AnthropicModel, run_agent
from nb_durable.errors import ModelCallError

try:
    run_agent("Fix the failing tests", client=AnthropicModel(), workspace=".")
except ModelCallError as e:
    print(e)
"""


def test_readme_s_agent_snippet_without_a_key_says_how_to_run_offline(tmp_path: Path) -> None:
    """It said "or use the demo model", naming nothing a new user could type."""
    done = forkserver.run(
        [sys.executable, "-c", README_AGENT], cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "no credentials for the Messages API (without a key, a new run can use the offline demo model: " in done.stdout
    assert "client=DemoModel() in Python, --demo in a cell or at a terminal)" in done.stdout, done.stdout
    # A run keeps its model: what this one needs is the key, so that is what "Then resume it"
    # follows (it followed the demo model, which no resume can switch to).
    assert "; for this run, set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN). Then resume it with " in done.stdout, done.stdout
    from nb_durable import DemoModel  # the name the message gives

    assert DemoModel is not None
