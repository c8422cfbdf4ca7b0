"""JSON Lines in and out, validated against workflow/schemas at every boundary.

Every reader names file, line and field when a record is bad; every writer
writes to a temporary file and renames it, so a crash never leaves a
half-written output behind for Snakemake (or a person) to mistake for a
finished one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from functools import cache
from itertools import accumulate, chain
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import fastjsonschema
import orjson
import yaml

from grumem.errors import GrumemError, NestingError, RecordError, WriteError
from grumem.io.paths import SCHEMAS_DIR
from grumem.io.startup_cache import cached_validator

if TYPE_CHECKING:
    import jsonschema

# jsonschema (its import costs ~80 ms) is the reference that names the field of a
# record the compiled check rejects: it is imported only then, or by the config's
# validation


# How deep arrays and objects may nest in any JSON (or YAML) grumem reads. The
# deepest nesting in the repository's transcripts and records is 10 (OpenHands
# events); the stdlib's parser and msgspec raise RecursionError at ~990 (Python's
# recursion limit less the caller's stack), PyYAML's pure-Python loader at ~490,
# and orjson refuses more than 1024 itself. 256 leaves the stack a reader is
# called from, and the recursive walks over a parsed value, their room.
MAX_JSON_DEPTH = 256


def nesting_why(depth: int | None, kind: str = "JSON") -> str:
    """The reason a NestingError gives (and the YAML loader's, grumem.config.settings)."""
    found = f"more than {MAX_JSON_DEPTH}" if depth is None else str(depth)
    return (
        f"{kind} nested {found} deep (arrays or objects inside each other); the limit is"
        f" {MAX_JSON_DEPTH} (grumem.io.jsonl.MAX_JSON_DEPTH): no transcript or record nests"
        " that deep, check what wrote it"
    )


_CONTAINERS = frozenset({dict, list})


def value_depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (0 for a scalar), one
    level at a time (no recursion), keeping only the containers of the next."""
    depth = 0
    level = [value] if type(value) in _CONTAINERS else []
    while level:
        depth += 1
        children = chain.from_iterable([v.values() if type(v) is dict else v for v in level])
        level = [c for c in children if type(c) in _CONTAINERS]
    return depth


# +1 for an opening bracket, -1 (0xff as a signed byte) for a closing one
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
# a string (its closing quote optional, so that every match consumes what it
# scanned and the scan stays linear on text that is not JSON) or a bracket
_TOKEN_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
_TOKEN_TEXT = re.compile(_TOKEN_BYTES.pattern.decode("ascii"), re.DOTALL)


def text_depth(text: str | bytes) -> tuple[int, int | None]:
    """(how deep arrays and objects nest in JSON text, the offset of the first bracket
    past MAX_JSON_DEPTH or None): its brackets outside strings counted in linear
    passes, no recursion. Text that is not JSON gets the depth of its brackets."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    # escapes removed (`\\` pairs first, as a parser reads them), every other
    # piece between quotes is outside the strings; C passes, then one over brackets
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    steps = array("b", outside.translate(_STEPS, _NOT_BRACKETS))
    depth = max(accumulate(steps), default=0)
    if depth <= MAX_JSON_DEPTH:
        return max(depth, 0), None
    # where: token by token, as far as the first bracket past the limit
    level = 0
    pattern = _TOKEN_BYTES if isinstance(text, bytes) else _TOKEN_TEXT
    for m in pattern.finditer(text):
        c = m.group()[:1]
        if c in (b"[", b"{", "[", "{"):
            level += 1
            if level > MAX_JSON_DEPTH:
                return depth, m.start()
        elif c in (b"]", b"}", "]", "}"):
            level -= 1
    return depth, None


def nesting_error(
    text: str | bytes,
    path: str | os.PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
) -> NestingError:
    """The NestingError for `text`, known to nest too deep, with its depth; `locate`
    (the text is a whole file) names the line where it passes the limit."""
    depth, past = text_depth(text)
    at = (0, 1, 1)
    if past is not None:
        nl = b"\n" if isinstance(text, bytes) else "\n"
        at = (past, text.count(nl, 0, past) + 1, past - text.rfind(nl, 0, past))
        if locate:
            line = at[1]
    found = depth if depth > MAX_JSON_DEPTH else None
    return NestingError(found, nesting_why(found), path, line, field, at)


def shallow(
    value: Any,
    text: str | bytes,
    path: str | os.PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
) -> Any:
    """`value` (parsed from `text`) when it nests at most MAX_JSON_DEPTH deep; else its
    NestingError. Each level takes two characters, so short text is not walked."""
    if len(text) > 2 * MAX_JSON_DEPTH and value_depth(value) > MAX_JSON_DEPTH:
        raise nesting_error(text, path, line, field, locate)
    return value


def sha256_text(text: str) -> str:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as e:
        # readers reject lone surrogates with file and line; this is the last guard
        raise GrumemError(
            f"text holds a lone surrogate {_escape(text[e.start])} at character {e.start}:"
            " not valid Unicode, it cannot be hashed or written"
        ) from None
    return hashlib.sha256(data).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open_input(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema `workflow/schemas/<name>.schema.yaml`."""
    with open(SCHEMAS_DIR / f"{name}.schema.yaml", encoding="utf-8") as f:
        # libyaml's loader: the pure-Python one costs ~0.1 s, much of a small stage job
        return yaml.load(f, Loader=SCHEMA_LOADER)  # noqa: S506 (a SafeLoader)


SCHEMA_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _is_strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def strict_validator_class(s: dict[str, Any]) -> type:
    """The schema's validator class, with `integer` meaning a JSON integer.

    jsonschema follows the spec's "a number with a zero fractional part is an
    integer", so `"index": 2.0` would pass and break every `range()`, list
    index and join on it later; records are written by programs, and 2.0
    where an integer belongs is a bug upstream to report, not to coerce."""
    import jsonschema

    cls = jsonschema.validators.validator_for(s)
    checker = cls.TYPE_CHECKER.redefine("integer", _is_strict_integer)
    return jsonschema.validators.extend(cls, type_checker=checker)


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    s = schema(name)
    cls = strict_validator_class(s)
    cls.check_schema(s)
    return cls(s)


def _field_path(error: jsonschema.ValidationError) -> str | None:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        # the missing property is in the message, not the path
        missing = error.message.split("'")[1] if "'" in error.message else None
        if missing:
            parts.append(missing)
    if error.validator == "additionalProperties" and "'" in error.message:
        parts.append(error.message.split("'")[1])
    return ".".join(parts) or None


def validate(
    record: Any,
    schema_name: str,
    path: str | os.PathLike[str] = "<record>",
    line: int | None = None,
) -> None:
    """Raise RecordError naming the first schema violation in `record`."""
    errors = sorted(_validator(schema_name).iter_errors(record), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        raise RecordError(path, line, _field_path(e), e.message)


def validate_fast(
    record: Any,
    schema_name: str,
    path: str | os.PathLike[str] = "<record>",
    line: int | None = None,
) -> None:
    """validate(), by the compiled check (fast_validator) when it accepts: jsonschema,
    the reference, decides only about a record the check rejects, and names its
    field. (The check is stricter in places: `$` in a pattern ends the string,
    where the reference allows a final newline; the reference's word stands.)"""
    try:
        fast_validator(schema_name)(record)
    except fastjsonschema.JsonSchemaValueException:
        validate(record, schema_name, path, line)


def open_input(path: str | os.PathLike[str], mode: str = "rb") -> IO[Any]:
    """Open an input file; a missing file or a directory is a RecordError naming it."""
    try:
        return open(path, mode, encoding=None if "b" in mode else "utf-8")  # noqa: SIM115
    except IsADirectoryError:
        raise RecordError(path, None, None, "is a directory, not a file") from None
    except OSError as e:
        raise RecordError(path, None, None, f"cannot read: {e.strerror or e}") from None


# A UTF-16 surrogate escape: JSON allows `\ud83d` alone, Python decodes it to a
# string that cannot be encoded as UTF-8 (nor hashed, nor written back).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(ch: str) -> str:
    return f"\\u{ord(ch):04x}"


def lone_surrogate(value: Any, where: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(field path, escape) of the first string (key or value) holding a lone surrogate."""
    if isinstance(value, str):
        m = _SURROGATE.search(value)
        return None if m is None else (".".join(where), _escape(m.group()))
    if isinstance(value, dict):
        for k, v in value.items():
            found = lone_surrogate(k, (*where, k)) or lone_surrogate(v, (*where, k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = lone_surrogate(v, (*where, str(i)))
            if found:
                return found
    return None


def check_no_lone_surrogate(
    path: str | os.PathLike[str], line: int | None, obj: Any, raw: bytes | None = None
) -> None:
    """RecordError naming the field when a JSON value holds half a UTF-16 surrogate pair
    (common in text cut by JavaScript); `raw` lets clean lines skip the walk."""
    if raw is not None and not _SURROGATE_ESCAPE.search(raw):
        return
    found = lone_surrogate(obj)
    if found:
        field, esc = found
        raise RecordError(
            path,
            line,
            field or None,
            f"lone surrogate {esc} (half of a UTF-16 pair, as left by text cut in"
            " JavaScript): not valid Unicode; remove it or complete the pair",
        )


def iter_json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes, Any]]:
    """(line number, raw bytes, parsed JSON) of a JSON Lines file, streaming.

    Blank lines are an error, not skipped: a stray blank line in a recorded
    file means it was edited by hand, and the reader should say so.
    """
    with open_input(path) as f:
        for lineno, raw in enumerate(f, start=1):
            yield lineno, raw, json_line(path, lineno, raw)


def json_line(path: str | os.PathLike[str], lineno: int, raw: bytes) -> Any:
    """One line of a JSON Lines file parsed, or a RecordError naming file and line
    (a NestingError when it nests deeper than MAX_JSON_DEPTH)."""
    try:
        if _long_digits(raw):
            raise orjson.JSONDecodeError("", "", 0)
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # orjson is ~5x faster but stricter (NaN, lone surrogates) and reads an
        # integer past 64 bits as a float: those lines the stdlib reads, or its
        # error names exactly
        obj = _loads_or_explain(path, lineno, raw)
    else:
        shallow(obj, raw, path, lineno)
    check_no_lone_surrogate(path, lineno, obj, raw)
    return obj


def _loads_or_explain(path: str | os.PathLike[str], lineno: int, raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        why = f"not UTF-8 ({e.reason} at byte {e.start})"
        raise RecordError(path, lineno, None, why) from None
    if not text.strip():
        raise RecordError(path, lineno, None, "blank line")
    try:
        return stdlib_loads(text, path, lineno)
    except NestingError:
        raise
    except json.JSONDecodeError as e:
        why = f"bad JSON: {e.msg} at column {e.colno}"
        raise RecordError(path, lineno, None, why) from None


def stdlib_loads(
    text: str | bytes,
    path: str | os.PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
) -> Any:
    """json.loads, the reference, with its nesting checked: a NestingError where it
    recurses past Python's limit (the text is scanned for its depth only then) or
    returns a value deeper than MAX_JSON_DEPTH. Location as for `loads`."""
    try:
        value = json.loads(text)
    except RecursionError:
        error = nesting_error(text, path, line, field, locate)
        if error.depth is None:
            raise  # not the text's depth: the caller's stack was already deep
        raise error from None
    return shallow(value, text, path, line, field, locate)


def loads(
    text: str | bytes,
    path: str | os.PathLike[str] | None = None,
    line: int | None = None,
    field: str | None = None,
    locate: bool = False,
    *,
    exact_integers: bool = True,
) -> Any:
    """JSON parsed by orjson, or by the stdlib (the reference) when orjson refuses it,
    so a caller sees the stdlib's value or its JSONDecodeError either way; nested
    deeper than MAX_JSON_DEPTH it is a NestingError, naming `path`, `line` and
    `field` when given (`locate`: the text is a whole file, name its line).

    Without `exact_integers` orjson may read an integer past 64 bits as a float
    (no string of a response body changes by that; the guard costs a pass)."""
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
    except UnicodeEncodeError:
        data = None  # a lone surrogate: the stdlib's to parse
    if data is not None and not (exact_integers and _long_digits(data)):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            return shallow(value, text, path, line, field, locate)
    return stdlib_loads(text, path, line, field, locate)


def loads_if_orjson(data: bytes) -> tuple[bool, Any]:
    """(True, value) when orjson parses `data` to what the stdlib would; (False, None)
    when it refuses (bad UTF-8 or JSON, NaN, a lone surrogate) or may differ (an
    integer past 64 bits): then the stdlib is the one to read it, or to explain why not.

    orjson reads the bytes as they are: beside them it holds the value and a scratch
    copy of a string, where the stdlib needs the whole text decoded first (up to
    four bytes a character) and then the value beside both."""
    if _long_digits(data):
        return False, None
    try:
        return True, orjson.loads(data)
    except orjson.JSONDecodeError:
        return False, None


# every digit as "0", every other byte as "x": a C pass instead of a regex that
# costs ~200 µs on a 6 KB line
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x78 for i in range(256))


def _long_digits(data: bytes) -> bool:
    """19 digits in a row: maybe an integer past 64 bits, which orjson reads as a
    float (in a string it only costs the stdlib's slower parse)."""
    return b"0" * 19 in data.translate(_DIGITS_AS_ZERO)


def read_jsonl(path: str | os.PathLike[str], schema_name: str | None = None) -> Iterator[dict]:
    """Yield (validated) records from a JSON Lines file, streaming."""
    if schema_name is None:
        for _, _, record in iter_json_lines(path):
            yield record
    else:
        for _, _, record in read_jsonl_fast(path, schema_name):
            yield record


# jsonschema takes ~1 ms a record (17 minutes for a million-turn log), the
# compiled check 20-150 µs
@cache
def fast_validator(schema_name: str) -> Callable[[Any], Any]:
    """workflow/schemas/<name> compiled to Python by fastjsonschema, the fast path of
    validate_fast. A record it rejects is re-checked by jsonschema, the
    reference, whose error names the field.
    The compiled code is cached under the sha256 of the schema file's bytes, so
    a job whose validators are cached does not even parse the schemas' YAML.
    """
    data = (SCHEMAS_DIR / f"{schema_name}.schema.yaml").read_bytes()
    inputs = {
        "schema_file": sha256_bytes(data),
        "yaml": yaml.__version__,
        "formats": {},
        "generator": _generator_version(),
    }
    return cached_validator(inputs, lambda: _generate_code(schema(schema_name), {}))


def compile_fast(s: dict[str, Any], formats: dict[str, str] | None = None) -> Callable[[Any], Any]:
    """fastjsonschema.compile, with `integer` meaning a JSON integer (as
    strict_validator_class does for jsonschema): its draft-06+ code generator
    lets 2.0 pass as an integer, so its `type` check is generated here.

    `formats` maps a format name to a regular expression. The generated code is
    cached by grumem.io.startup_cache under the sha256 of everything it is made
    from (a changed schema is a new entry), so a job does not generate and compile
    it again."""
    formats = dict(formats or {})
    return cached_validator(
        {"schema": s, "formats": formats, "generator": _generator_version()},
        lambda: _generate_code(s, formats),
    )


@cache
def _generator_version() -> str:
    """The sha256 of this module's source: an edit to _generate_code or _strict_type
    (or anything here) makes every cached validator a new entry, with no version to bump."""
    return sha256_bytes(Path(__file__).read_bytes())


def _generate_code(s: dict[str, Any], formats: dict[str, str]) -> str:
    """Module source defining `validate`: fastjsonschema's compile_to_code, with our type check."""
    base = _generator_class(s)
    generator_cls = type("StrictIntegers" + base.__name__, (base,), {"generate_type": _strict_type})
    resolver = fastjsonschema.RefResolver.from_schema(s, handlers={}, store={})
    generator = generator_cls(s, resolver=resolver, formats=formats)
    name = resolver.get_scope_name()
    return f"{generator.global_state_code}\n{generator.func_code}\nvalidate = {name}\n"


def _generator_class(s: dict[str, Any]) -> type:
    """fastjsonschema's code generator for the draft `s` declares; its newest (2019-09)
    for a later one, as fastjsonschema.compile chooses (every schema here is 2020-12)."""
    from fastjsonschema.draft04 import CodeGeneratorDraft04
    from fastjsonschema.draft06 import CodeGeneratorDraft06
    from fastjsonschema.draft07 import CodeGeneratorDraft07
    from fastjsonschema.draft2019 import CodeGeneratorDraft2019

    version = s.get("$schema", "")
    for draft, generator in (
        ("draft-04", CodeGeneratorDraft04),
        ("draft-06", CodeGeneratorDraft06),
        ("draft-07", CodeGeneratorDraft07),
    ):
        if draft in version:
            return generator
    return CodeGeneratorDraft2019


def _strict_type(self: Any) -> None:
    from fastjsonschema.draft04 import JSON_TYPE_TO_PYTHON_TYPE
    from fastjsonschema.generator import enforce_list

    types = enforce_list(self._definition["type"])
    if "integer" not in types or "number" in types:
        return type(self).__mro__[1].generate_type(self)
    python_types = ", ".join(JSON_TYPE_TO_PYTHON_TYPE[t] for t in types)
    # bool is an int in Python, not an integer in JSON
    extra = "" if "boolean" in types else f" or isinstance({self._variable}, bool)"
    with self.l("if not isinstance({variable}, ({})){}:", python_types, extra):
        self.exc("{name} must be {}", " or ".join(types), rule="type")


def read_jsonl_fast(
    path: str | os.PathLike[str], schema_name: str
) -> Iterator[tuple[int, bytes, dict]]:
    """(line number, raw bytes, validated record) for files that grow with the corpus."""
    for lineno, raw, record in iter_json_lines(path):
        yield lineno, raw, checked(record, schema_name, path, lineno)


def checked(record: Any, schema_name: str, path: str | os.PathLike[str], lineno: int) -> Any:
    """`record` once the compiled schema accepts it; else a RecordError naming the field."""
    try:
        fast_validator(schema_name)(record)
    except fastjsonschema.JsonSchemaValueException as e:
        validate(record, schema_name, path, lineno)  # names the field, if it agrees
        raise RecordError(path, lineno, ".".join(e.path[1:]) or None, e.message) from None
    return record


def dumps(record: Any) -> str:
    """The one JSON serialisation of records: compact, UTF-8, key order kept."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# orjson writes what the stdlib does for records except a few floats and types;
# those (and anything it refuses) go through `dumps`, the reference
_ORJSON_OPTS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def dumps_bytes(record: Any) -> bytes:
    """`dumps(record)` as UTF-8 bytes, byte for byte, by orjson where it agrees (~10x faster)."""
    if _orjson_agrees(record):
        try:
            return orjson.dumps(record, option=_ORJSON_OPTS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate, a huge integer, a non-string key: the stdlib decides
    return dumps(record).encode("utf-8")


def dumps_bytes_where(record: Any, suspects: Iterable[Any]) -> bytes:
    """`dumps_bytes(record)` for a record whose only values that orjson may write
    differently (floats, values of unknown type) are `suspects`: only those are walked
    (a corpus line has a few among thousands of strings)."""
    if all(_orjson_agrees(v) for v in suspects):
        try:
            return orjson.dumps(record, option=_ORJSON_OPTS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate: the stdlib decides
    return dumps(record).encode("utf-8")


def _orjson_agrees(value: Any) -> bool:
    """False when `value` holds what orjson writes differently from json.dumps: a float
    below 1e-4 (0.00001 for 1e-05), NaN or infinity (null), a subclass of a JSON type."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is dict:
        return all(type(k) is str and _orjson_agrees(v) for k, v in value.items())
    if t is list or t is tuple:
        return all(_orjson_agrees(v) for v in value)
    if t is float:
        return value == 0.0 or (math.isfinite(value) and abs(value) >= 1e-4)
    return False


# errors only a write meets: the one-line message names the file being written
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def _write_error(path: str | os.PathLike[str], e: OSError) -> WriteError:
    why = e.strerror or str(e)
    return WriteError(f"{path}: cannot write: {why}; free space or choose a writable place")


def check_writable(directory: str | os.PathLike[str]) -> None:
    """Create `directory` if needed and make (and remove) a file in it: a read-only or
    unwritable output place is an error before the work, not after it."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".grumem-probe.", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise WriteError(
            f"{directory}: cannot write there: {e.strerror or e}; make it writable "
            "(nothing was sent yet)"
        ) from None


@contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside `path`; rename it over `path` only on success."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise _write_error(path, e) from None
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; outputs get the permissions of any new file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as e:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in _WRITE_ERRNOS:
            raise _write_error(path, e) from None
        raise


@contextmanager
def atomic_files(
    directory: str | os.PathLike[str], names_modes: Iterable[tuple[str, str]]
) -> Iterator[dict[str, IO[Any]]]:
    """Several files of `directory` written as one: each through atomic_writer, renamed
    into place only when the block succeeds, in reverse order of `names_modes` (name
    the file whose presence means "complete" first: it is renamed last). On error no
    file is renamed, and a directory this created is removed again if left empty."""
    directory = Path(directory)
    created = not directory.exists()
    try:
        with ExitStack() as stack:
            yield {
                name: stack.enter_context(atomic_writer(directory / name, mode))
                for name, mode in names_modes
            }
    except BaseException:
        if created and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
        raise


def write_jsonl(
    path: str | os.PathLike[str], records: Iterable[Any], schema_name: str | None = None
) -> int:
    """Write records atomically, validating each; return how many were written."""
    n = 0
    check = None if schema_name is None else fast_validator(schema_name)
    with atomic_writer(path, "wb") as f:
        for n, record in enumerate(records, start=1):
            if check is not None:
                try:
                    check(record)
                except fastjsonschema.JsonSchemaValueException as e:
                    validate(record, schema_name, path, n)  # names the field, if it agrees
                    raise RecordError(path, n, ".".join(e.path[1:]) or None, e.message) from None
            try:
                f.write(dumps_bytes(record))
            except UnicodeEncodeError:
                check_no_lone_surrogate(path, n, record)  # names the field
                raise
            f.write(b"\n")
    return n


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Pretty JSON for small summary files (kappa.json, summary.json), atomically."""
    with atomic_writer(path) as f:
        f.write(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False))
        f.write("\n")
