"""LangChain's self-ask-with-search agent (run inside the LangChain venv).

As in LangChain's documentation: ``initialize_agent(tools, OpenAI(temperature=0),
agent=AgentType.SELF_ASK_WITH_SEARCH)`` with one tool named "Intermediate Answer"; the
agent's own prompt and defaults (``max_iterations=15``, parse errors not handled).  The
tool searches Sleuth's index through the harness's endpoint and returns the k passages.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RowFailure, parse_args, run_questions, search
from langchain_classic.agents import AgentType, initialize_agent
from langchain_core.exceptions import OutputParserException
from langchain_core.tools import Tool
from langchain_openai import OpenAI

STOPPED = "Agent stopped due to iteration limit or time limit."


def _classify(e: BaseException) -> str:
    if isinstance(e, OutputParserException) or "output parsing error" in str(e)[:300].lower():
        return "parse_error"
    return "exception"


def main() -> None:
    args = parse_args()
    if args.row != "langchain-self-ask":
        raise SystemExit(f"unknown LangChain row {args.row!r}")
    llm = OpenAI(model=args.model, temperature=0, base_url=f"{args.llm}/v1", api_key="local")

    def run_search(query: str) -> str:
        return "\n\n".join(f"{p['title']}: {p['text']}" for p in search(args.search, query, args.k))

    tools = [
        Tool(name="Intermediate Answer", func=run_search, description="useful for when you need to ask with search")
    ]
    agent = initialize_agent(tools, llm, agent=AgentType.SELF_ASK_WITH_SEARCH, return_intermediate_steps=True)

    def answer(question: str) -> str:
        out = agent.invoke({"input": question})
        text = str(out.get("output", ""))
        if text.strip() == STOPPED:
            queries = [str(action.tool_input) for action, _ in out.get("intermediate_steps", [])]
            kind = "loop" if len(set(queries)) < len(queries) else "step_limit"
            raise RowFailure(kind, f"agent stopped after {len(queries)} steps")
        return text

    run_questions(args, answer, _classify)


if __name__ == "__main__":
    main()
