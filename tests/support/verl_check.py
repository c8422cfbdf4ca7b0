"""Run by tests/test_verl.py with .venv-verl's python (verl 0.9.1 installed there,
never in the main venv): verl itself reads a grumem turns.parquet and scores it.

    verl_check.py GGUF_FILE OVERRIDE...

The overrides (`grumem verl-config`'s, plus the test's) are composed onto
verl's own trainer config (verl/trainer/config/ppo_trainer.yaml) by Hydra, as
`python -m verl.trainer.main_ppo OVERRIDE...` would; then

1. verl.utils.dataset.rl_dataset.RLHFDataset loads data.train_files with SmolLM2's
   tokenizer (transformers reads it from the demo's GGUF), filtering overlong
   prompts (which applies the chat template to every row); the test also
   applies the template to every item and checks each message survives.
2. compute_score is loaded through verl.trainer.ppo.reward.get_custom_reward_fn
   from that config and called on every item with the recorded response;
3. the same file read by pandas (numpy arrays, a null integer in a struct as NaN),
   as offline evaluation scripts read it, is scored row by row the same way.

Prints one JSON object with what it saw; the test asserts on it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
from hydra import compose, initialize_config_module
from transformers import AutoTokenizer
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset

COMPARED = ("r_update", "r_exit", "r_exit_reason", "r_format", "parsed", "update_gate", "exit_gate")


def main(gguf: str, *overrides: str) -> dict:
    started = time.monotonic()
    gguf_path = Path(gguf)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    tokenizer_s = time.monotonic() - started
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=list(overrides))
    dataset = RLHFDataset(
        data_files=[config.data.train_files], tokenizer=tokenizer, config=config.data
    )
    score = get_custom_reward_fn(config)
    mismatches, templated, scores, token_counts = [], 0, [], []
    for i in range(len(dataset)):
        item = dataset[i]
        messages = list(item["raw_prompt"])
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        if all(m["content"] in text for m in messages):
            templated += 1
        token_counts.append(len(tokenizer(text)["input_ids"]))
        extra = item["extra_info"]
        got = score(
            data_source=item["data_source"],
            solution_str=extra["response"],
            ground_truth=item["reward_model"]["ground_truth"],
            extra_info=extra,
        )
        want = {k: extra[k] for k in COMPARED}
        if {k: got[k] for k in COMPARED} != want:
            mismatches.append({"index": extra["index"], "got": got, "want": want})
        scores.append(got["score"])
    pandas_mismatches = 0
    for row in pd.read_parquet(config.data.train_files).to_dict("records"):
        extra = row["extra_info"]
        got = score(
            data_source=row["data_source"],
            solution_str=extra["response"],
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info=extra,
        )
        written = {k: extra[k] for k in COMPARED}
        written["r_exit"] = None if written["r_exit"] != written["r_exit"] else written["r_exit"]
        pandas_mismatches += {k: got[k] for k in COMPARED} != written
    return {
        "rows": len(dataset),
        "pandas_mismatch_count": pandas_mismatches,
        "templated": templated,
        "mismatches": mismatches[:5],
        "mismatch_count": len(mismatches),
        "scores": scores,
        "max_prompt_tokens": max(token_counts, default=0),
        "vocab_size": len(tokenizer),
        "has_chat_template": tokenizer.chat_template is not None,
        "tokenizer_s": round(tokenizer_s, 1),
        "total_s": round(time.monotonic() - started, 1),
    }


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
