"""JSON Lines in and out, validated against workflow/schemas at every boundary.

Every reader names file, line and field when a record is bad; every writer
writes to a temporary file and renames it, so a crash never leaves a
half-written output behind for Snakemake (or a person) to mistake for a
finished one. The JSON text itself (parsing with the nesting checked, the one
serialisation, sha256) is grumem.core.json_text's.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import fastjsonschema
import yaml

from grumem.core.json_text import check_no_lone_surrogate, dumps_bytes, json_line, sha256_bytes
from grumem.errors import RecordError, WriteError
from grumem.io.paths import SCHEMAS_DIR
from grumem.io.startup_cache import cached_validator

if TYPE_CHECKING:
    import jsonschema

# jsonschema (its import costs ~80 ms) is the reference that names the field of a
# record the compiled check rejects: it is imported only then, or by the config's
# validation


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
        loaded: dict[str, Any] = yaml.load(f, Loader=SCHEMA_LOADER)  # noqa: S506 (a SafeLoader)
        return loaded


SCHEMA_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _is_strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def strict_validator_class(s: dict[str, Any]) -> type[jsonschema.protocols.Validator]:
    """The schema's validator class, with `integer` meaning a JSON integer.

    jsonschema follows the spec's "a number with a zero fractional part is an
    integer", so `"index": 2.0` would pass and break every `range()`, list
    index and join on it later; records are written by programs, and 2.0
    where an integer belongs is a bug upstream to report, not to coerce."""
    import jsonschema

    cls = jsonschema.validators.validator_for(s)
    checker = cls.TYPE_CHECKER.redefine("integer", _is_strict_integer)
    # jsonschema's stubs leave `extend` untyped: it returns a validator class
    extended: type[jsonschema.protocols.Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, type_checker=checker
    )
    return extended


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


def iter_json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes, Any]]:
    """(line number, raw bytes, parsed JSON) of a JSON Lines file, streaming.

    Blank lines are an error, not skipped: a stray blank line in a recorded
    file means it was edited by hand, and the reader should say so.
    """
    with open_input(path) as f:
        for lineno, raw in enumerate(f, start=1):
            yield lineno, raw, json_line(path, lineno, raw)


def read_jsonl(
    path: str | os.PathLike[str], schema_name: str | None = None
) -> Iterator[dict[str, Any]]:
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

    types: list[str] = enforce_list(self._definition["type"])  # type: ignore[no-untyped-call]
    if "integer" not in types or "number" in types:
        parent: Any = type(self).__mro__[1]  # the generator class this one extends
        parent.generate_type(self)
        return
    python_types = ", ".join(JSON_TYPE_TO_PYTHON_TYPE[t] for t in types)
    # bool is an int in Python, not an integer in JSON
    extra = "" if "boolean" in types else f" or isinstance({self._variable}, bool)"
    with self.l("if not isinstance({variable}, ({})){}:", python_types, extra):
        self.exc("{name} must be {}", " or ".join(types), rule="type")


def read_jsonl_fast(
    path: str | os.PathLike[str], schema_name: str
) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
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
                    assert schema_name is not None  # `check` is its validator
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
