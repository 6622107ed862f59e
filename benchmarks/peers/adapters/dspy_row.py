"""DSPy rows (run inside the DSPy venv): the multi-hop program of DSPy's documentation and ``dspy.ReAct``.

* ``dspy-multihop``: the documentation's SimplifiedBaleen program (GenerateSearchQuery per hop,
  then GenerateAnswer "short factoid answers"), its defaults: 2 hops; passages per hop = the
  harness's k, so retrieval matches every other row.
* ``dspy-react``: ``dspy.ReAct("question -> answer", tools=[search_wikipedia])`` as in DSPy's
  ReAct documentation, default ``max_iters``.

The LM is ``dspy.LM("openai/<model>")`` on the counting proxy, DSPy's cache off (so every call
reaches the model and is counted); prompts, adapters and sampling settings are DSPy's defaults.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch a price list at import
os.environ.setdefault("DSPY_CACHEDIR", str(Path.home() / ".cache" / "sleuth" / "peers" / "dspy-cache"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dspy
from common import RowFailure, parse_args, run_questions, search


class GenerateAnswer(dspy.Signature):
    """Answer questions with short factoid answers."""

    context = dspy.InputField(desc="may contain relevant facts")
    question = dspy.InputField()
    answer = dspy.OutputField(desc="often between 1 and 5 words")


class GenerateSearchQuery(dspy.Signature):
    """Write a simple search query that will help answer a complex question."""

    context = dspy.InputField(desc="may contain relevant facts")
    question = dspy.InputField()
    query = dspy.OutputField()


def _deduplicate(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


class SimplifiedBaleen(dspy.Module):
    def __init__(self, retrieve: Any, passages_per_hop: int = 3, max_hops: int = 2) -> None:
        super().__init__()
        self.generate_query = [dspy.ChainOfThought(GenerateSearchQuery) for _ in range(max_hops)]
        self.retrieve = retrieve
        self.passages_per_hop = passages_per_hop
        self.generate_answer = dspy.ChainOfThought(GenerateAnswer)
        self.max_hops = max_hops

    def forward(self, question: str) -> Any:
        context: list[str] = []
        for hop in range(self.max_hops):
            query = self.generate_query[hop](context=context, question=question).query
            passages = self.retrieve(query, self.passages_per_hop)
            context = _deduplicate(context + passages)
        pred = self.generate_answer(context=context, question=question)
        return dspy.Prediction(context=context, answer=pred.answer)


def _classify(e: BaseException) -> str:
    name = type(e).__name__
    return "parse_error" if "Parse" in name or "parse" in str(e)[:200].lower() else "exception"


def main() -> None:
    args = parse_args()
    lm = dspy.LM(f"openai/{args.model}", api_base=f"{args.llm}/v1", api_key="local", cache=False)
    dspy.configure(lm=lm)

    def retrieve(query: str, k: int) -> list[str]:
        return [f"{p['title']} | {p['text']}" for p in search(args.search, query, k)]

    if args.row == "dspy-multihop":
        program = SimplifiedBaleen(retrieve, passages_per_hop=args.k)

        def answer(question: str) -> str:
            return str(program(question=question).answer)

    elif args.row == "dspy-react":

        def search_wikipedia(query: str) -> list[str]:
            """Search Wikipedia for passages relevant to the query."""
            return retrieve(query, args.k)

        react = dspy.ReAct("question -> answer", tools=[search_wikipedia])

        def answer(question: str) -> str:
            pred = react(question=question)
            steps = [k for k in pred.trajectory if k.startswith("tool_name_")]
            if len(steps) >= react.max_iters and pred.trajectory.get(f"tool_name_{len(steps) - 1}") != "finish":
                calls = [str(pred.trajectory.get(f"tool_args_{i}")) for i in range(len(steps))]
                kind = "loop" if len(set(calls)) < len(calls) else "step_limit"
                raise RowFailure(kind, f"ReAct used all {react.max_iters} steps", answer=str(pred.answer))
            return str(pred.answer)

    else:
        raise SystemExit(f"unknown DSPy row {args.row!r}")
    run_questions(args, answer, _classify)


if __name__ == "__main__":
    main()
