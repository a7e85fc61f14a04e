"""The forms of a known value that a command prints: quoted by a shell, escaped by a JSON encoder."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nb_durable.agent.secrets import Redactor
from nb_durable.agent.secrets.formats import value_forms
from nb_durable.agent.tools import ToolContext, ToolRegistry
from nb_durable.agent.tools.builtin import builtin_tools

# Each prints $V back as a word of shell: bash's own quoting (a UTF-8 locale and the C one,
# where a non-ASCII letter is written in octal), set -x's trace, and Python's shlex.
SHELL_QUOTING = (
    'V=$DB_PASSWORD; printf "%q\\n" "$V"; echo "${V@Q}"; declare -p V; (set -x; : "$V") 2>&1;'
    ' python3 -c "import os, shlex; print(shlex.quote(os.environ[\'DB_PASSWORD\']))";'
    ' LC_ALL=C printf "%q\\n" "$V"; LC_ALL=C bash -c "declare -p DB_PASSWORD"'
)
_MASKED_LINE = re.compile(r"(declare -[-x] \w+=|\+ : )?\$?['\"]?\[REDACTED:DB_PASSWORD[^\]]*\]['\"]?")


@pytest.mark.parametrize(
    "password",
    [
        "p@ss w0rd$x'y",  # printf %q: p@ss\ w0rd\$x\'y; ${V@Q}: 'p@ss w0rd$x'\''y'
        'abc"def\\ghi-jk',
        "~tab\there!x*?[]",  # a tab: $'...' in every locale
        "ünïcode pw~1#",  # $'\303\274n...' in the C locale
        "a=b;c&d|e(f)g<h>i",
        "back`tick{}:~x",
        "#esc\x1bape'q",
    ],
)
def test_a_value_quoted_by_the_shell_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password: str) -> None:
    """A value holding shell metacharacters showed escaped in ``printf %q``, ``declare -p`` and
    ``set -x`` (a bash tool's trace), and no form matched it."""
    monkeypatch.setenv("DB_PASSWORD", password)
    reg = ToolRegistry(builtin_tools(), pass_env=["DB_PASSWORD"])
    out = reg.run("run_bash", {"command": SHELL_QUOTING}, ToolContext.for_step(tmp_path, "r", "s")).content
    lines = out.splitlines()
    assert lines[-1] == "[exit status 0]"
    assert len(lines) == 8
    for line in lines[:-1]:
        assert _MASKED_LINE.fullmatch(line), line


def test_a_value_with_slashes_escaped_as_some_json_encoders_write_them_is_masked() -> None:
    """PHP's json_encode (and Perl's JSON::PP with escape_slash) write "/" as "\\/"."""
    r = Redactor({"SERVICE_TOKEN": 'tok/en+pw/42"x'})
    assert r.redact(r'{"token":"tok\/en+pw\/42\"x"}') == '{"token":"[REDACTED:SERVICE_TOKEN as escaped]"}'
    assert r.redact(r'{"token":"tok\/en+pw\/42x"}') == r'{"token":"tok\/en+pw\/42x"}'  # another value


PASSWORD = "Sü!p(er)*pw'~42/x y"


@pytest.mark.parametrize(
    ("printed", "masked"),
    [
        # As each prints it (captured from the tools): jq's @uri and JavaScript's
        # encodeURIComponent keep !'()*; Python's bytes repr; Perl's Data::Dumper; HTML.
        ("S%C3%BC!p(er)*pw'~42%2Fx%20y", "[REDACTED:SMTP_PASSWORD as url-encoded]"),
        ('b"S\\xc3\\xbc!p(er)*pw\'~42/x y"', 'b"[REDACTED:SMTP_PASSWORD as escaped]"'),
        ("$VAR1 = 'Sü!p(er)*pw\\'~42/x y';", "$VAR1 = '[REDACTED:SMTP_PASSWORD as escaped]';"),
        ("<b>Sü!p(er)*pw&#x27;~42/x y</b>", "<b>[REDACTED:SMTP_PASSWORD as escaped]</b>"),
        ("<b>Sü!p(er)*pw&#39;~42/x y</b>", "<b>[REDACTED:SMTP_PASSWORD as escaped]</b>"),
    ],
)
def test_a_value_encoded_by_common_tools_is_masked(printed: str, masked: str) -> None:
    assert Redactor({"SMTP_PASSWORD": PASSWORD}).redact(printed) == masked


def test_a_value_in_base32_or_spaced_out_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``base32`` (alone, or of the whole environment) and ``sed 's/./& /g'`` showed the value."""
    token = "ghp_Zq8rTmW2xKp4Lm9Nb3Vc7Xz1Qa5Ws6Ed8Rf0"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    reg = ToolRegistry(builtin_tools(), pass_env=["GITHUB_TOKEN"])
    command = "printf %s \"$GITHUB_TOKEN\" | base32; env | sort | base32; echo \"$GITHUB_TOKEN\" | sed 's/./& /g'"
    out = reg.run("run_bash", {"command": command}, ToolContext.for_step(tmp_path, "r", "s")).content
    assert out.startswith("[REDACTED:GITHUB_TOKEN as base32]\n")
    assert out.count("[REDACTED:GITHUB_TOKEN as base32]") == 2
    assert out.endswith("\n[REDACTED:GITHUB_TOKEN as spaced] \n[exit status 0]")
    assert "Zq8rTmW2" not in out and base64.b32encode(token.encode())[8:24].decode() not in out


@given(st.text(min_size=8, max_size=40))
def test_no_form_is_longer_than_six_characters_a_byte(value: str) -> None:
    """A streaming redactor holds back a multiple of the longest form: the bound keeps it near the value's."""
    for form in value_forms(value, 8):
        assert len(form.text) <= 6 * len(value.encode("utf-8", "surrogatepass")), form
