"""Redaction: which variables count as secrets, exact masking, and masking of a text in pieces."""

from __future__ import annotations

import base64
import json
import os
import random
from pathlib import Path

import pytest

from nb_durable.agent.secrets import Redactor, held_secrets, hold, is_secret_name, tool_environment
from nb_durable.agent.tools import ToolContext, ToolRegistry
from nb_durable.agent.tools.builtin import builtin_tools

KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("ANTHROPIC_API_KEY", True),
        ("ANTHROPIC_AUTH_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("aws_secret_access_key", True),
        ("DB_Password", True),
        ("MY_SECRET", True),
        ("DB_PASSWD", True),
        ("SMTP_PASS", True),
        ("db_pwd", True),
        ("STRIPE_SECRET", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("PATH", False),
        ("HOME", False),
        ("PWD", False),
        ("OLDPWD", False),
        ("NB_DURABLE_PASS_ENV", False),
        ("PASSAGE_COUNT", False),
        ("ANTHROPIC_BASE_URL", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_from_environ_takes_secret_names_and_ignores_short_values() -> None:
    r = Redactor.from_environ(
        {"ANTHROPIC_API_KEY": KEY, "GITHUB_TOKEN": "ghp_1234567890", "SHORT_TOKEN": "1234567", "HOME": "/home/someone"}
    )
    assert r.names == ["ANTHROPIC_API_KEY", "GITHUB_TOKEN"]
    text = f"key={KEY} gh=ghp_1234567890 short=1234567 home=/home/someone"
    assert r.redact(text) == (
        "key=[REDACTED:ANTHROPIC_API_KEY] gh=[REDACTED:GITHUB_TOKEN] short=1234567 home=/home/someone"
    )


def test_from_environ_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_PASSWORD", "hunter2hunter2")
    assert Redactor.from_environ().redact("pw hunter2hunter2") == "pw [REDACTED:SOME_SERVICE_PASSWORD]"


def test_longest_value_wins_when_one_contains_another() -> None:
    r = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-and-more"})
    assert r.redact("x abcdefgh-and-more y abcdefgh z") == "x [REDACTED:B_TOKEN] y [REDACTED:A_TOKEN] z"


def test_a_value_with_a_trailing_newline_is_masked_bare_too() -> None:
    r = Redactor({"X_KEY": "value-from-a-file\n"})
    assert r.redact("got value-from-a-file here") == "got [REDACTED:X_KEY] here"


def test_regex_characters_in_values_are_literal() -> None:
    r = Redactor({"X_SECRET": "a.b*c+d?(e)[f]"})
    assert r.redact("a.b*c+d?(e)[f] axbbbcd") == "[REDACTED:X_SECRET] axbbbcd"


def test_shared_value_is_named_deterministically() -> None:
    assert Redactor({"B_KEY": KEY, "A_KEY": KEY}).redact(KEY) == "[REDACTED:A_KEY]"


def test_repr_and_names_never_show_values() -> None:
    r = Redactor({"ANTHROPIC_API_KEY": KEY})
    assert KEY not in repr(r)
    assert "ANTHROPIC_API_KEY" in repr(r)


def test_empty_redactor_is_falsy_and_masks_only_known_formats() -> None:
    r = Redactor()
    assert not r
    plain = "a plain line of output, nothing secret in it\n"
    assert r.redact(plain) == plain
    assert r.redact(KEY) == "[REDACTED:anthropic-key]"
    stream = r.stream()
    assert stream.feed(plain) + stream.flush() == plain


def test_merged_covers_both() -> None:
    a, b = Redactor({"A_KEY": "aaaaaaaaaa"}), Redactor({"B_KEY": "bbbbbbbbbb"})
    assert a.merged(b).redact("aaaaaaaaaa bbbbbbbbbb") == "[REDACTED:A_KEY] [REDACTED:B_KEY]"
    assert a.merged(Redactor()) is a


@pytest.mark.parametrize("seed", range(25))
def test_stream_in_random_pieces_equals_whole_redaction(seed: int) -> None:
    rng = random.Random(seed)
    secrets = {"A_KEY": "abcabcab", "B_TOKEN": "abcabcabXYZ", "C_SECRET": KEY}
    r = Redactor(secrets)
    alphabet = ["a", "b", "c", "X", "Y", "Z", " ", "\n", *secrets.values()]
    text = "".join(rng.choice(alphabet) for _ in range(400))
    stream = r.stream()
    out, pos = [], 0
    while pos < len(text):
        step = rng.randint(0, 12)
        out.append(stream.feed(text[pos : pos + step]))
        pos += step
    out.append(stream.flush())
    assert "".join(out) == r.redact(text)


def test_stream_never_emits_a_prefix_the_next_piece_could_complete() -> None:
    r = Redactor({"X_TOKEN": KEY})
    stream = r.stream()
    shown = stream.feed("output " + KEY[:10])
    assert KEY[:3] not in shown
    assert stream.pending > 0
    assert shown + stream.feed(KEY[10:] + " end") + stream.flush() == "output [REDACTED:X_TOKEN] end"


def test_redacting_a_large_output_is_fast_enough() -> None:
    r = Redactor({f"K{i}_KEY": f"secret-value-{i:04d}-xyz" for i in range(50)})
    text = ("lorem ipsum dolor sit amet " * 40_000) + "secret-value-0042-xyz"
    assert r.redact(text).endswith("[REDACTED:K42_KEY]")


def test_tool_environment_strips_credentials_unless_passed_through() -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "DB_PASSWD": "x", "GH_TOKEN": "ghp_x", "PATH": "/bin", "PWD": "/w"}
    assert tool_environment(env) == {"PATH": "/bin", "PWD": "/w"}
    assert tool_environment(env, ["GH_TOKEN"]) == {"GH_TOKEN": "ghp_x", "PATH": "/bin", "PWD": "/w"}
    named = {**env, "NB_DURABLE_PASS_ENV": "GH_TOKEN, DB_PASSWD"}
    assert set(tool_environment(named)) == {"GH_TOKEN", "DB_PASSWD", "PATH", "PWD", "NB_DURABLE_PASS_ENV"}
    assert tool_environment({**env, "NB_DURABLE_PASS_ENV": "*"}) == {**env, "NB_DURABLE_PASS_ENV": "*"}


@pytest.mark.parametrize(
    ("store", "kept"),
    [
        ("postgresql://app:s3cret-pw-9@db/app", False),
        ("postgresql://app@db/app?sslmode=require&password=QueryPw-5555", False),
        ("postgresql://app:s3cret/pw-9@db/app", False),  # a password holding /, as SQLAlchemy reads one
        ("postgresql://:s3cret-pw-9@db/app?user=app", False),
        ("postgresql://app@db/app?sslcert=c.crt&sslpassword=KeyPw-5555", False),
        ("postgresql://app@db/app", True),
        ("postgresql://db:5432/app?options=x@y", True),
        ("runs", True),
    ],
)
def test_the_runs_store_reaches_no_tool_when_its_url_carries_a_password(store: str, kept: bool) -> None:
    assert ("NB_DURABLE_STORE" in tool_environment({"NB_DURABLE_STORE": store, "PATH": "/bin"})) is kept


PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"


@pytest.mark.parametrize("seed", range(15))
def test_stream_in_random_pieces_equals_whole_redaction_for_formats_and_encodings(seed: int) -> None:
    rng = random.Random(seed)
    value = "tok+en/value=42xyz"
    r = Redactor({"SERVICE_TOKEN": value})
    b64 = base64.b64encode(value.encode()).decode()
    alphabet = ["a", " ", "\n", "=", "X_KEY=", value, value[::-1], b64, value.encode().hex(), KEY, PEM, "://u:", "://:", "@h", "/", "#"]
    # Pieces end at a space: a format right after a letter ("xsk-ant-...") is not one, by design.
    text = " ".join(rng.choice(alphabet) for _ in range(300))
    stream = r.stream()
    out, pos = [], 0
    while pos < len(text):
        step = rng.randint(0, 300)
        out.append(stream.feed(text[pos : pos + step]))
        pos += step
    out.append(stream.flush())
    assert "".join(out) == r.redact(text)
    assert value not in "".join(out) and KEY not in "".join(out) and "MIIEvQ" not in "".join(out)


def test_a_value_broken_across_lines_is_masked() -> None:
    r = Redactor({"X_TOKEN": KEY})
    folded = "\n".join(KEY[i : i + 10] for i in range(0, len(KEY), 10))
    assert r.redact(f"start\n{folded}\nend") == "start\n[REDACTED:X_TOKEN]\nend"
    assert r.redact(" ".join(KEY[i : i + 2] for i in range(0, len(KEY), 2))) != "[REDACTED:X_TOKEN]"  # spaces: not caught


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("STRIPE_SECRET=abc123def456\n", "STRIPE_SECRET=[REDACTED:secret-assignment]\n"),
        ("export DB_PASS='hunter2hunter2'", "export DB_PASS='[REDACTED:secret-assignment]'"),
        ("    api_key=settings.anthropic_key,", None),  # a line of code, not of a .env file
        ("TOKEN=$(cat /run/secrets/token)", None),  # a script that reads it, not the value
        ("OLDPWD=/home/someone/projects", None),
        ("see postgres://app:s3cr3t-pw@db.internal/app", "see postgres://app:[REDACTED:url-password]@db.internal/app"),
        ("postgresql://app@db/app?sslmode=require&password=QueryPw-5555 ok",
         "postgresql://app@db/app?sslmode=require&password=[REDACTED:url-query-password] ok"),
        ("postgresql://app@db/app?sslcert=c.crt&sslpassword=KeyPw-5555 ok",
         "postgresql://app@db/app?sslcert=c.crt&sslpassword=[REDACTED:url-query-password] ok"),
        ("the password=field of a form", None),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED:aws-secret-key]"),
        ("xoxb-123456789012-abcdefghijkl", "[REDACTED:slack-token]"),
        ("the words desk, sk-ant and AKIA alone", None),
    ],
)
def test_known_formats_are_masked_with_few_false_alarms(text: str, masked: str | None) -> None:
    assert Redactor().redact(text) == (text if masked is None else masked)


def test_every_held_credential_is_masked_even_when_two_share_a_name() -> None:
    first, second = "held-key-one-" + "a" * 12, "held-key-two-" + "b" * 12
    hold("api_key", first)
    hold("api_key", second)
    hold("api_key", "short")  # too short to mask: ignored
    assert {("api_key", first), ("api_key", second)} <= held_secrets()
    assert ("api_key", "short") not in held_secrets()
    masked = ToolRegistry().redactor_for({}).redact(f"{first} {second}")
    assert masked == "[REDACTED:api_key] [REDACTED:api_key]"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        # Every consumer's reading hidden: libpq's (# and ? are the password's, an empty user), urllib's
        # (to the last @ before the first /), SQLAlchemy's (a / in the password, up to the next @).
        ("postgresql://u:Hx#9q?Zr7@db/app", "postgresql://u:[REDACTED:url-password]@db/app"),
        ("redis://:Hx9qZr7w@cache:6379/0", "redis://:[REDACTED:url-password]@cache:6379/0"),
        ("mysql://root:Hx@9q@Zr7@db/app", "mysql://root:[REDACTED:url-password]@db/app"),
        ("mysql+pymysql://root:Hx/9q?Zr7#w@db:3306/app", "mysql+pymysql://root:[REDACTED:url-password]@db:3306/app"),
        ("see (amqp://u:Hx/9q@Zr7@mq), then", "see (amqp://u:[REDACTED:url-password]@mq), then"),
        # Up to five digits and a /: a port and a path to urllib and libpq, a password to SQLAlchemy.
        ("postgresql://user:12/abc@host/db", "postgresql://user:[REDACTED:url-password]@host/db"),
        ("redis://:8080/x@y@cache:6379/0", "redis://:[REDACTED:url-password]@cache:6379/0"),
        ("https://registry.npmjs.org:443/@types/node http://db:5432/app?user=a@b http://h:80/a/b@c", None),
        # An @ in a path or a query is no user info's.
        ("https://example.com/users/@alice", None),
        ("https://example.com:8080/users/@alice and https://medium.com/@bob/post", None),
        ("http://[::1]:8080/@x http://h1:5432,h2:5433/db?user=a@b mailto:bob@example.com", None),
        ("pip install git+ssh://git@github.com:org/repo.git@v1.0", None),
    ],
)
def test_a_url_s_password_is_masked_whole_however_it_is_read(url: str, masked: str | None) -> None:
    assert Redactor().redact(url) == (url if masked is None else masked)
    stream = Redactor().stream()
    assert "".join(stream.feed(c) for c in url) + stream.flush() == Redactor().redact(url)


def test_a_value_escaped_as_json_or_repr_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool's dict result is JSON-encoded by the registry: a password holding a quote, a
    backslash or a non-ASCII letter showed escaped there, and no form matched it."""
    password = 'Pa"ss\\word-ünï-42'
    monkeypatch.setenv("DB_PASSWORD", password)
    reg = ToolRegistry()

    @reg.tool
    def settings() -> dict[str, str]:
        """The service's settings."""
        return {"password": password}

    @reg.tool
    def printed() -> str:
        """What a program that prints repr() and ASCII JSON shows."""
        return f"{password!r} {json.dumps(password)}"

    ctx = ToolContext.for_step(tmp_path, "r", "s")
    assert reg.run("settings", {}, ctx).content == '{"password": "[REDACTED:DB_PASSWORD as escaped]"}'
    assert reg.run("printed", {}, ctx).content == "'[REDACTED:DB_PASSWORD as escaped]' \"[REDACTED:DB_PASSWORD as escaped]\""


def test_the_password_of_a_url_in_any_variable_is_masked_alone_and_encoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DATABASE_URL is no secret's name, so tools see it: its password was masked only inside
    the URL, and a command that printed it alone (or reversed, or base64) showed it."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:Zq8rT%40mW2x@db/app?sslpassword=KeyPass-99x")
    reg = ToolRegistry(builtin_tools())
    ctx = ToolContext.for_step(tmp_path, "r", "s")
    command = (
        "python3 -c \"import os, urllib.parse as u; print(u.unquote(u.urlsplit(os.environ['DATABASE_URL']).password))\";"
        " echo $DATABASE_URL | rev; printf KeyPass-99x | base64"
    )
    out = reg.run("run_bash", {"command": command}, ctx).content
    for shown in ("Zq8rT@mW2x", "Zq8rT%40mW2x"[::-1], "KeyPass-99x"[::-1], base64.b64encode(b"KeyPass-99x").decode()[:12]):
        assert shown not in out
    assert out.startswith("[REDACTED:DATABASE_URL:password]\n[REDACTED:DATABASE_URL:password as reversed]=drowssaplss?")
    assert Redactor.from_environ({"DATABASE_URL": "https://example.com/?page=2"}).names == []
    # A password urllib reads as a port and a path (SQLAlchemy's reading): masked whole, alone too.
    r = Redactor.from_environ({"DATABASE_URL": "postgresql://app:12/Zq8rTmW2x@db/app"})
    assert r.redact("12/Zq8rTmW2x") == "[REDACTED:DATABASE_URL:password]"


def test_a_secret_set_or_changed_between_two_tool_calls_is_masked_in_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's copy and its secrets are found again only when it changed (decoding
    every variable was paid two or three times a tool call): a variable set in the notebook
    between two calls, or a value changed in place under the same name, must be seen by the next."""
    reg = ToolRegistry()

    @reg.tool
    def echo(name: str) -> str:
        """The value of one environment variable, as a tool's subprocess would print it."""
        return os.environ.get(name, "")

    seen: list[dict[str, str]] = []

    def call(name: str) -> str:
        ctx = ToolContext.for_step(tmp_path, "r", "s")
        seen.append(dict(ctx.env))
        return reg.run("echo", {"name": name}, ctx).content

    monkeypatch.setenv("PLAIN_SETTING", "visible-value-1")
    assert call("PLAIN_SETTING") == "visible-value-1"
    monkeypatch.setenv("LATE_API_TOKEN", "first-token-value-77")
    assert call("LATE_API_TOKEN") == "[REDACTED:LATE_API_TOKEN]"
    monkeypatch.setenv("LATE_API_TOKEN", "second-token-value-88")  # same name, same length
    assert seen[-1]["LATE_API_TOKEN"] == "first-token-value-77"
    out = call("LATE_API_TOKEN")
    assert seen[-1]["LATE_API_TOKEN"] == "second-token-value-88"
    assert out == "[REDACTED:LATE_API_TOKEN]"
    monkeypatch.delenv("LATE_API_TOKEN")
    call("PLAIN_SETTING")
    assert "LATE_API_TOKEN" not in seen[-1]
