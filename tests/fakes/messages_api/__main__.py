"""A loopback HTTP server that speaks the Anthropic Messages API, in its own process.

    python -m tests.fakes.messages_api --port P --scenario FILE.json --log FILE.jsonl
        [--answering-model M] [--min-cacheable-tokens N] [--default-thinking TYPE]
        [--refuse-sampling MODEL_PREFIX ...] [--signing-secret S] [--context-window N]

Prints its URL once it serves; stops on SIGTERM or SIGINT. Standard library only, so it
starts fast and never imports anthropic.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from tests.fakes.messages_api.scenario import ScriptedScenario
from tests.fakes.messages_api.server import MessagesAPIServer


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a JSON scenario until SIGTERM/SIGINT; print the URL when ready."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.messages_api", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (read the printed URL)")
    parser.add_argument("--scenario", required=True, help="a JSON ScriptedScenario: {\"turns\": [...]}")
    parser.add_argument("--log", help="append every request to this JSON-lines file")
    parser.add_argument("--api-key", help="accept only this key (default: any non-empty key)")
    parser.add_argument("--answering-model", help="the model replies name (default: the requested one)")
    parser.add_argument("--min-cacheable-tokens", type=int, default=0, help="shortest cached prefix (default 0)")
    parser.add_argument("--default-thinking", default="disabled", help="thinking type of a request without one")
    parser.add_argument("--refuse-sampling", action="append", default=[], metavar="MODEL_PREFIX",
                        help="models (by name prefix) that refuse temperature/top_k/top_p")
    parser.add_argument("--signing-secret", help="key of thinking signatures (default: the fixed one)")
    parser.add_argument("--context-window", type=int, help="context window in tokens (default: unlimited)")
    parser.add_argument("--batch-delay", type=float, default=0.0, help="seconds from a Message Batch's creation to its end")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    scenario = ScriptedScenario.load(args.scenario)
    options: dict[str, Any] = {"signing_secret": args.signing_secret} if args.signing_secret else {}
    with MessagesAPIServer(
        scenario,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        log_path=args.log,
        answering_model=args.answering_model,
        min_cacheable_tokens=args.min_cacheable_tokens,
        default_thinking=args.default_thinking,
        refuse_sampling=args.refuse_sampling,
        context_window=args.context_window,
        batch_delay=args.batch_delay,
        **options,
    ) as server:
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
