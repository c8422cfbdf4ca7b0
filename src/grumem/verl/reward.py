"""grumem as verl's reward function: score a new rollout of one corpus turn by the
corpus's own rules.

verl loads this FILE by path (`reward.custom_reward_function.path`, `name:
compute_score`) as a module outside any package, so it imports grumem only
absolutely (grumem must be installed in the trainer's environment: the
`[verl]` extra) and defines no dataclass (a dataclass needs its module in
sys.modules, which verl's file loader does not promise).

A rollout is a new answer to a recorded prompt: turn t of a recorded
trajectory, with the memory the recorded turns before it built. It is scored
as that trajectory with turn t's answer replaced, through the functions the
export uses (grumem.core.loop's reading of an answer, grumem.core.rewards), so the
recorded answer gets back exactly the rewards the corpus holds for its turn:

- the answer is read as the loop reads one (grumem.core.loop.interpret_content,
  the strict gate parser), never a lenient one;
- r_update: +1 if the new update gate equals the turn's evidence label
  (`ground_truth`, "yes" or "no"), −1 otherwise or when unparsed;
- r_exit: from the recorded exit gates of the trajectory (`extra_info.exit_gates`)
  with turn t's replaced, against `extra_info.t_last_evidence`; at L2 a new
  `end` drops the recorded turns after t. Null when the record cannot say
  (r_exit_reason): no evidence, aborted, no exit gate, or `beyond_record` (an
  L2 trajectory the recording ended with `end` at t, answered `continue`: where
  it would have stopped was never recorded);
- r_format: 1 only if the answer parses and every other recorded ask of the
  trajectory parsed (`extra_info.other_asks_parsed`), as the corpus's r_format.
- r_outcome is null in the corpus (no answer-correctness signal) and not scored.

score = w_update·r_update + w_exit·r_exit (when a value) + w_format·r_format for a
parsed answer. An unparsed answer scores `format_failure`, whatever its other
components (no gate is defaulted to score it): by default −2.0, below the lowest
score a parsed answer can get with the default weights (−1 − 0.75 + 0 = −1.75),
so a malformed answer never pays better than a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, Literal, overload

from grumem.core.loop import interpret_content
from grumem.core.rewards import EXIT_NO_EVIDENCE, exit_decision, r_exit, r_format, r_update
from grumem.records.rollout_row import EVIDENCE

W_UPDATE = 1.0
W_EXIT = 1.0
W_FORMAT = 1.0
FORMAT_FAILURE = -2.0
BEYOND_RECORD = "beyond_record"
# what compute_score needs of extra_info (the corpus's turns.parquet carries it)
NEEDED = ("t", "level", "exit_gates", "aborted", "t_last_evidence", "other_asks_parsed")


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    *,
    w_update: float = W_UPDATE,
    w_exit: float = W_EXIT,
    w_format: float = W_FORMAT,
    format_failure: float = FORMAT_FAILURE,
    **_verl: Any,
) -> dict[str, Any]:
    """verl's custom reward function: {"score", r_update, r_exit, r_exit_reason,
    r_format, parsed, update_gate, exit_gate, parse_error (the failing tag or None)}.

    Weights come from `reward.custom_reward_function.reward_kwargs`; other keyword
    arguments verl passes are ignored."""
    info = _extra_info(extra_info)
    label = _label(ground_truth)
    gate = interpret_content(solution_str)
    update_gate, exit_gate, parsed = gate.update_gate, gate.exit_gate, gate.parsed
    error = None if gate.parse_error is None else gate.parse_error.tag
    r_ex, reason = _exit_reward(info, exit_gate)
    r_upd, r_fmt = r_update(update_gate, label), r_format([parsed, info["other_asks_parsed"]])
    result = {
        "r_update": r_upd,
        "r_exit": r_ex,
        "r_exit_reason": reason,
        "r_format": r_fmt,
        "parsed": parsed,
        "update_gate": update_gate,
        "exit_gate": exit_gate,
        "parse_error": error,
    }
    if parsed:
        score = w_update * r_upd + w_format * r_fmt
        if r_ex is not None:
            score += w_exit * r_ex
    else:
        score = format_failure
    return {"score": float(score), **result}


def _exit_reward(
    info: Mapping[str, Any], exit_gate: bool | None
) -> tuple[float | None, str | None]:
    """r_exit of the recorded trajectory with turn t's exit gate replaced."""
    t, gates = info["t"], list(info["exit_gates"])  # a copy: turn t's gate is replaced
    last_recorded = t == len(gates)
    if info["level"] == "L2":
        if exit_gate is True:
            gates = gates[:t]
        elif gates[t - 1] is True and last_recorded:
            return None, BEYOND_RECORD
    gates[t - 1] = exit_gate
    t_exit, reason = exit_decision(list(enumerate(gates, start=1)), bool(info["aborted"]))
    if t_exit is None:
        return None, reason
    value = r_exit(t_exit, info["t_last_evidence"])
    return value, (EXIT_NO_EVIDENCE if value is None else None)


def _extra_info(extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields compute_score uses, as plain Python values.

    verl's and pandas' readers hand a row over in other forms than the corpus wrote:
    numpy scalars (np.bool_ is not `True`), numpy arrays for lists, and, through
    pandas, a nullable integer inside a struct as a float (6.0) with NaN for null.
    Every form that holds the written value exactly is read as it; anything else
    (6.5, "6", a number where a boolean belongs) is refused naming the field, never
    guessed: a NaN compared as a turn would score as a late exit."""
    if extra_info is None:
        raise ValueError(
            "grumem compute_score needs extra_info (a grumem turns.parquet row's):"
            f" {', '.join(NEEDED)}"
        )
    missing = [k for k in NEEDED if k not in extra_info]
    if missing:
        raise ValueError(
            f"extra_info lacks {', '.join(missing)}: export the corpus with this grumem"
            " (turns.parquet from `grumem export`)"
        )
    gates = [_optional_bool(f"exit_gates[{i}]", g) for i, g in enumerate(_sequence(extra_info))]
    t = _turn("t", extra_info["t"], null=False)
    last = _turn("t_last_evidence", extra_info["t_last_evidence"], null=True)
    if not 1 <= t <= len(gates):
        raise ValueError(f"extra_info.t {t!r} is not a turn of extra_info.exit_gates")
    level = extra_info["level"]
    if level not in ("L1", "L2"):
        raise ValueError(f"extra_info.level: {level!r} is not L1 or L2")
    return {
        "t": t,
        "level": str(level),
        "exit_gates": gates,
        "aborted": _optional_bool("aborted", extra_info["aborted"], null=False),
        "t_last_evidence": last,
        "other_asks_parsed": _optional_bool(
            "other_asks_parsed", extra_info["other_asks_parsed"], null=False
        ),
    }


def _is_nan(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, Integral) and value != value


def _sequence(extra_info: Mapping[str, Any]) -> list[Any]:
    """extra_info.exit_gates as a list: a list, a tuple or a numpy array of them."""
    gates = extra_info["exit_gates"]
    if isinstance(gates, (str, bytes, Mapping)) or not hasattr(gates, "__iter__"):
        raise ValueError(f"extra_info.exit_gates: {gates!r} is not a list of exit gates")
    return list(gates)


@overload
def _turn(name: str, value: Any, null: Literal[False]) -> int: ...
@overload
def _turn(name: str, value: Any, null: bool) -> int | None: ...
def _turn(name: str, value: Any, null: bool) -> int | None:
    """A turn number (>= 1): an int, a numpy integer, or an integral float; NaN or None
    for null where the field may be null."""
    if (value is None or _is_nan(value)) and null:
        return None
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        pass  # True is 1 to Python: a boolean is no turn
    elif isinstance(value, Integral):
        if int(value) >= 1:
            return int(value)
    elif isinstance(value, Real) and float(value).is_integer() and float(value) >= 1:
        return int(float(value))
    if null:
        raise ValueError(f"extra_info.{name} {value!r} is neither a turn nor null")
    raise ValueError(f"extra_info.{name} {value!r} is not a turn (an integer >= 1)")


def _optional_bool(name: str, value: Any, null: bool = True) -> bool | None:
    if (value is None or _is_nan(value)) and null:
        return None
    if type(value).__name__ not in ("bool", "bool_"):  # Python's or numpy's
        raise ValueError(f"extra_info.{name}: {value!r} is not a boolean")
    return bool(value)


def _label(ground_truth: str) -> bool:
    try:
        return EVIDENCE[ground_truth]
    except (KeyError, TypeError):
        raise ValueError(
            f"ground_truth {ground_truth!r} is not an evidence label: expected 'yes' or 'no'"
        ) from None
