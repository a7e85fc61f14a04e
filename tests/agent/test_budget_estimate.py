"""When ``count_tokens`` fails, a budget is checked against an estimate, which must not
undercount text that is not ASCII: Claude's tokenizer gives about one token or more for each
CJK character, four times the old four-characters-a-token guess. Through the real SDK against
the loopback Messages API, whose ``count_tokens`` fails as a gateway without it does (404).
ASCII text keeps the estimate it always had: the scripted and demo models' figures rest on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.messages import request_tokens, text_message
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.loop import AgentResult, run_agent
from tests.fakes import Error, MessagesAPIServer, reply
from tests.fakes.messages_api.content import usage

MODEL = "claude-test-1"
CHINESE = "请把这些笔记整理好,按日期排序。" * 1500  # 16 characters a sentence, no ASCII
JAPANESE = "メモを日付順に整理してください。" * 1500
MAX_TOKENS = 100


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


@pytest.mark.parametrize("task", [CHINESE, JAPANESE], ids=["chinese", "japanese"])
def test_a_call_whose_cjk_prompt_would_cross_the_budget_is_refused_when_count_tokens_fails(
    workspace: Path, task: str
) -> None:
    # What the call really costs: at least one input token per character (the tokenizer's
    # figure for CJK, the system prompt and tools not even counted) and its max_tokens out.
    really = Usage(input_tokens=len(task), output_tokens=MAX_TOKENS)
    cost = price_for(MODEL).dollars(really)
    budget = round(cost * 0.9, 6)  # a call that costs that crosses it
    answer = reply("整理しました。", usage=usage(input_tokens=len(task), output_tokens=MAX_TOKENS))
    with MessagesAPIServer([answer], count_tokens_error=Error(404)) as server:
        result = _budgeted(server, workspace, task, "cjk", budget)
        counted = [r.outcome for r in server.requests_to("count_tokens")]
        made = server.requests_to("messages")
    assert counted == ["error"]  # the count failed: the estimate decided
    assert result.status == "budget_exhausted" and not made, (result.status, result.cost.paid_dollars, budget)
    assert f"of its budget of ${budget:g}" in result.detail
    assert "tokens in, estimated as count_tokens failed with 404, up to" in result.detail  # not the API's count


def _budgeted(server: MessagesAPIServer, workspace: Path, task: str, run_id: str, budget: float) -> AgentResult:
    """A run of ``task`` against ``server`` under a budget of ``budget`` dollars."""
    return run_agent(
        task, run_id=run_id, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10), model=MODEL,
        store=str(workspace.parent / "runs"), workspace=workspace, hooks=RunHooks(sleep=lambda s: None),
        max_tokens=MAX_TOKENS, max_usd=budget,
    )  # fmt: skip


def test_a_budget_stop_on_the_apis_own_count_says_no_estimate(workspace: Path) -> None:
    with MessagesAPIServer([reply("Done.")]) as server:
        result = _budgeted(server, workspace, CHINESE, "counted", 0.0001)
        counted = [r.outcome for r in server.requests_to("count_tokens")]
    assert counted == ["counted"] and result.status == "budget_exhausted"
    assert "estimated" not in result.detail, result.detail


def test_the_estimate_counts_cjk_at_a_token_a_character_or_more_and_ascii_as_before() -> None:
    for text in (CHINESE, JAPANESE):
        assert request_tokens({"messages": [{"role": "user", "content": text}]}) >= len(text)
    # ASCII: four characters a token, the figures the code before this change gave.
    assert request_tokens({"messages": [{"role": "user", "content": "x" * 4000}]}) == 1011
    assert text_message("word " * 400, output_tokens=None)["usage"]["output_tokens"] == 500
    # A lone surrogate (a broken proxy's JSON) is counted, never an error.
    assert request_tokens({"messages": [{"role": "user", "content": "\udce9 ok"}]}) >= 1
